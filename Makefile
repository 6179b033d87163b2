# The commands the README promises. GOTOOLCHAIN=local: build with the installed Go.
export GOTOOLCHAIN := local

.PHONY: build test demo

build:
	go build -o bin/aot ./cmd/aot

# Everything CI checks: vet, the Windows build, and all tests with the race detector.
test:
	go vet ./...
	GOOS=windows go build ./...
	go test -race -timeout 20m ./...
