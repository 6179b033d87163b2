//go:build !temporal

package cli

import (
	"context"

	"github.com/aot-loop/aot/internal/preflight"
)

// temporalEngineCheck: this aot hands the Temporal commands to aot-temporal,
// which must be found.
func temporalEngineCheck() preflight.Check {
	bin, err := temporalBinary()
	if err != nil {
		return preflight.Check{Name: "aot-temporal", Level: preflight.Error, Detail: "not found beside aot nor on PATH",
			Fix: "build it (make build, or go build -tags temporal -o bin/aot-temporal ./cmd/aot) and put it beside aot"}
	}
	return preflight.Check{Name: "aot-temporal", Level: preflight.OK, Detail: bin}
}

// temporalServiceCheck: without the SDK, whether the service answers a
// connection at all.
func temporalServiceCheck(ctx context.Context, address string) preflight.Check {
	return preflight.Temporal(ctx, address)
}
