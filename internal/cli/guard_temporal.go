//go:build temporal

package cli

import (
	"context"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/confine"
)

// guardedAgent runs an agent's attempts under a guard: aot worker's agents,
// started by no engine of this process, die with the worker too and are
// confined like aot run's.
type guardedAgent struct {
	agent.Agent
	guard *confine.Guard
}

func (a guardedAgent) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	return a.Agent.Run(confine.With(ctx, a.guard), t)
}
