# The commands the README promises. GOTOOLCHAIN=local: build with the installed Go.
export GOTOOLCHAIN := local

.PHONY: build test demo agent-clis

build:
	go build -o bin/aot ./cmd/aot
	go build -o bin/aot-hook ./cmd/aot-hook

# The agent CLIs the integration tests drive, pinned, from the npm registry
# (scripts/agent-clis.sh; a cached install is kept).
agent-clis:
	scripts/agent-clis.sh

# Everything CI checks: vet, the Windows build, and all tests with the race
# detector (they drive the real agent CLIs, installed first).
test: agent-clis
	go vet ./...
	GOOS=windows go build ./...
	go test -race -timeout 20m ./...
