# The commands the README promises. GOTOOLCHAIN=local: build with the installed Go.
export GOTOOLCHAIN := local

.PHONY: build test demo agent-clis temporal-cli

# bin/aot-temporal is aot with the Temporal engine (the temporal build tag):
# aot hands aot run --engine temporal, aot worker and the commands on a
# Temporal loop over to it, so that the Temporal SDK's start-up stays out
# of every other aot command.
# bin/aot is linked statically (CGO_ENABLED=0: it needs no C library), which
# saves the dynamic loader's work on every start.
build:
	CGO_ENABLED=0 go build -o bin/aot ./cmd/aot
	go build -tags temporal -o bin/aot-temporal ./cmd/aot
	go build -o bin/aot-hook ./cmd/aot-hook

# The agent CLIs the integration tests drive, pinned, from the npm registry
# (scripts/agent-clis.sh; a cached install is kept).
agent-clis:
	scripts/agent-clis.sh

# The Temporal CLI whose dev server the Temporal integration tests start,
# pinned, built with go install (scripts/temporal-cli.sh; a cached build is
# kept; the first one takes about 8 minutes).
temporal-cli:
	scripts/temporal-cli.sh

# Everything CI checks: vet, the Windows build, and all tests with the race
# detector (they drive the real agent CLIs and a Temporal dev server,
# installed first; a test that cannot find them fails, never skips).
test: agent-clis temporal-cli
	go vet ./...
	go vet -tags temporal ./...
	GOOS=windows go build ./...
	GOOS=windows go build -tags temporal ./...
	AOT_REQUIRE_TEMPORAL=1 go test -race -tags temporal -timeout 20m ./...
	go test -race -run 'TestTemporal' ./internal/cli/
