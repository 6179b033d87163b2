package backend

import (
	"errors"

	"github.com/aot-loop/aot/internal/agent"
)

func newExec(s Spec, env Env) (agent.Agent, error) {
	if s.Command == "" {
		return nil, errors.New("no command: set --agent-command, AOT_AGENT_COMMAND or command: in the agents file")
	}
	return &agent.Exec{Command: s.Command, Timeout: env.Timeout, Log: env.Log}, nil
}
