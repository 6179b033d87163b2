package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/prompt"
)

// agentChoice is what a command's flags say about the agents.
type agentChoice struct {
	Agent   string   // --agent: every role's backend
	Model   string   // --model: every role's model
	Roles   []string // --role ROLE=AGENT[:MODEL]
	Command string   // --agent-command or AOT_AGENT_COMMAND: the exec agent's command
}

// addAgentFlags defines the flags that choose the agents (aot run, aot align).
func addAgentFlags(f *pflag.FlagSet, agentName, model *string, roles *[]string, command *string) {
	f.StringVar(agentName, "agent", "", "backend of every role: "+strings.Join(backend.Names(), ", ")+" (default: the agents file "+backend.FileName+" beside the state file, else exec)")
	f.StringVar(model, "model", "", "model of every role (default: the agents file's, else the backend's own)")
	f.StringArrayVar(roles, "role", nil, "one role's backend, `ROLE=AGENT[:MODEL]` (repeatable), e.g. --role judge=anthropic:claude-opus-4-5")
	f.StringVar(command, "agent-command", "", "shell `command` of the exec agent (env AOT_AGENT_COMMAND)")
}

// buildAgents reads the agents file beside stateFile, applies the flags and
// builds every role's agent, with logs per attempt beside the journal.
func buildAgents(stateFile string, ch agentChoice) (agent.Agent, backend.Config, error) {
	cfg, err := backend.Load(stateFile)
	if err != nil {
		return nil, cfg, err
	}
	if err := cfg.Override(ch.Agent, ch.Model, ch.Roles); err != nil {
		return nil, cfg, usagef("%v", err)
	}
	withCommand(&cfg, ch.Command)
	for _, role := range agent.Roles {
		if s := cfg.For(role); s.Agent == "exec" && strings.TrimSpace(s.Command) == "" {
			if ch.Agent == "" && cfg.Path == "" {
				return nil, cfg, usagef("no agent chosen: --agent claude|codex|gemini, or --agent-command CMD for the exec agent (or AOT_AGENT_COMMAND), or write %s", backend.PathFor(stateFile))
			}
			return nil, cfg, usagef("--agent-command is required for the exec agent (or set AOT_AGENT_COMMAND, or command: in %s)", backend.PathFor(stateFile))
		}
	}
	env := backend.Env{
		Log:     attemptLogs(history.LogDir(stateFile)),
		Prompts: prompt.Renderer{Dir: filepath.Join(filepath.Dir(stateFile), prompt.OverrideDir)},
		Getenv:  os.Getenv,
	}
	a, err := backend.New(cfg, env)
	if err != nil {
		return nil, cfg, usagef("%v", err)
	}
	return a, cfg, nil
}

// withCommand makes command the exec agent's command, in the default and
// in every role on exec ("" changes nothing).
func withCommand(cfg *backend.Config, command string) {
	if command == "" {
		return
	}
	cfg.Command = command
	for r, s := range cfg.Roles {
		if s.Agent == "" || s.Agent == "exec" {
			s.Command = command
			cfg.Roles[r] = s
		}
	}
}

// attemptLogs opens each attempt's log in logDir, one file per atom, role
// and attempt.
func attemptLogs(logDir string) func(t agent.Task) (io.WriteCloser, error) {
	return func(t agent.Task) (io.WriteCloser, error) {
		if err := os.MkdirAll(logDir, journal.DirMode); err != nil {
			return nil, err
		}
		name := history.LogName(t.Atom.ID, string(t.Role), t.Attempt)
		return os.OpenFile(filepath.Join(logDir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, journal.FileMode)
	}
}

// agentsDoc is each role's agent in one phrase, for the journal and status.
func agentsDoc(cfg backend.Config) map[string]string {
	out := map[string]string{}
	for _, r := range agent.Roles {
		if r == agent.Align {
			continue
		}
		out[string(r)] = cfg.For(r).String()
	}
	return out
}
