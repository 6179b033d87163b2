//go:build temporal

package cli

import "github.com/aot-loop/aot/internal/preflight"

// temporalEngineCheck: this program is aot-temporal.
func temporalEngineCheck() preflight.Check {
	return preflight.Check{Name: "aot-temporal", Level: preflight.OK, Detail: "this program (" + selfPath() + ") has the Temporal engine"}
}
