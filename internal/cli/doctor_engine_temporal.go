//go:build temporal

package cli

import (
	"context"
	"time"

	"github.com/aot-loop/aot/internal/durable"
	"github.com/aot-loop/aot/internal/preflight"
)

// temporalEngineCheck: this program is aot-temporal.
func temporalEngineCheck() preflight.Check {
	return preflight.Check{Name: "aot-temporal", Level: preflight.OK, Detail: "this program (" + selfPath() + ") has the Temporal engine"}
}

// temporalServiceCheck connects as aot run --engine temporal and aot worker
// do (address, namespace, TLS, API key from the environment).
func temporalServiceCheck(ctx context.Context, _ string) preflight.Check {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := durable.Dial(ctx)
	if err != nil {
		return preflight.TemporalUnreachable(err)
	}
	c.Close()
	address, namespace := durable.Where()
	return preflight.Check{Name: "temporal", Level: preflight.OK, Detail: "connected to " + address + " (namespace " + namespace + ")"}
}
