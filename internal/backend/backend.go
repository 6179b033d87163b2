// Package backend builds the agents a loop runs: one backend per role
// (claude, codex, gemini, openai, anthropic, exec), chosen once per project
// in the agents file beside the state file, or per run by flags.
package backend

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/prompt"
)

// Env is what every backend gets besides its Spec.
type Env struct {
	// Log returns where an attempt's log goes (the CLI's event stream and
	// stderr as they happen); nil discards.
	Log func(t agent.Task) (io.WriteCloser, error)
	// Prompts renders the role prompts (with the project's overrides).
	Prompts prompt.Renderer
	// Timeout is the deadline of one attempt (0: the context's only).
	Timeout time.Duration
	// Getenv reads the environment (API keys, binary paths).
	Getenv func(string) string
}

// Factory makes a backend's agent from its settings.
type Factory func(s Spec, env Env) (agent.Agent, error)

// factories are the backends by name. A plain table, not registration from
// each file's init: what a binary links is what this table names, and the
// two HTTP backends are small net/http clients (llm_http.go).
var factories = map[string]Factory{
	"anthropic": newAnthropic,
	"claude":    newClaude,
	"codex":     newCodex,
	"exec":      newExec,
	"gemini":    newGemini,
	"openai":    newOpenAI,
}

// Names lists the known backends.
func Names() []string {
	n := slices.Collect(maps.Keys(factories))
	sort.Strings(n)
	return n
}

// New builds the agent of every role from c: a ByRole over one agent per
// distinct role setting.
func New(c Config, env Env) (agent.Agent, error) {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	b := &ByRole{Roles: map[agent.Role]agent.Agent{}, Specs: map[agent.Role]Spec{}}
	built := map[string]agent.Agent{}
	for _, role := range agent.Roles {
		s := c.For(role)
		key := s.key()
		a, ok := built[key]
		if !ok {
			f, known := factories[s.Agent]
			if !known {
				return nil, fmt.Errorf("%s: unknown agent %q (available: %s)", c.where(role), s.Agent, strings.Join(Names(), ", "))
			}
			var err error
			if a, err = f(s, env); err != nil {
				return nil, fmt.Errorf("%s: %s agent: %w", c.where(role), s.Agent, err)
			}
			built[key] = a
		}
		b.Roles[role] = a
		b.Specs[role] = s
	}
	return b, nil
}

// ByRole sends each task to its role's agent.
type ByRole struct {
	Roles map[agent.Role]agent.Agent
	Specs map[agent.Role]Spec
}

// Run runs t on its role's agent.
func (b *ByRole) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	a, ok := b.Roles[t.Role]
	if !ok {
		return agent.Result{}, &agent.AttemptError{Reason: fmt.Sprintf("no agent for the %s role", t.Role), Kind: agent.KindCrash}
	}
	return a.Run(ctx, t)
}

// lazyRegexp compiles pattern on first use, not when aot starts: every
// command pays for what package initialisation does, and only a run with
// that backend needs these.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}
