package hooks

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/aot-loop/aot/internal/state"
)

// role is what a session or subagent may do in the loop.
type role int

const (
	roleWorker      role = iota // the session itself, or a subagent working on an atom
	roleReadOnly                // a probe, verifier, judge or planner: reads only
	roleCoordinator             // the aot coordinator: reads and delegates
)

// roleOf reads a subagent's role from its agent_type: the aot plugin's
// agents ("aot-loop:probe", "aot-probe", or a bare "probe") have theirs;
// any other subagent of the owning session works like the session (a
// worker). No agent_type is the session itself.
func roleOf(agentType string) role {
	name := strings.ToLower(agentType)
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		if !strings.HasPrefix(name[:i], "aot") {
			return roleWorker
		}
		name = name[i+1:]
	}
	name = strings.TrimPrefix(name, "aot-")
	switch name {
	case "probe", "verifier", "judge", "planner":
		return roleReadOnly
	case "coordinator":
		return roleCoordinator
	}
	return roleWorker
}

// Tools by what they do, across the three clients (Claude Code, Codex,
// Gemini CLI). A tool in none of these sets is never approved.
var (
	readTools = set("Read", "Grep", "Glob", "LS", "NotebookRead", "TodoWrite",
		"read_file", "read_many_files", "list_directory", "glob", "search_file_content", "grep_search")
	writeTools = set("Write", "Edit", "MultiEdit", "NotebookEdit", "write_file", "replace")
	shellTools = set("Bash", "run_shell_command")
	agentTools = set("Agent", "Task", "invoke_agent")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// decideTool answers a tool hook. It fails closed: it approves only when
// every check passes, and any doubt or error is no decision.
func decideTool(o *Options, in Input) (Decision, error) {
	if in.ToolName == "" {
		return Decision{}, nil
	}
	l, err := gate(o, in)
	if err != nil || l == nil {
		return Decision{}, err
	}
	s, err := state.NewStore(l.path).ReadValid()
	if err != nil {
		return Decision{}, err
	}
	if s.Control.Status != state.ControlRunning || s.Control.StopRequested || s.Control.RedirectRequested {
		return Decision{}, nil
	}
	r := roleOf(in.AgentType)
	if !permitted(r, in, l, o.getenv) {
		return Decision{}, nil
	}
	return Decision{Action: Allow, Reason: "AoT Loop: " + in.ToolName + " is within the " + roleName(r) + " role of the session running the loop"}, nil
}

func roleName(r role) string {
	switch r {
	case roleReadOnly:
		return "read-only"
	case roleCoordinator:
		return "coordinator"
	}
	return "worker"
}

// permitted reports whether role r may use the tool without asking: reading
// for every role; delegating for the coordinator and workers; writing
// inside the project (never .claude/, .git/ or the loop's files, however
// the path is spelled) and shell commands that cannot touch .claude/ or the
// loop's files, for workers only.
func permitted(r role, in Input, l *loop, getenv func(string) string) bool {
	t := in.ToolName
	switch {
	case readTools[t]:
		return true
	case agentTools[t]:
		return r == roleWorker || r == roleCoordinator
	case r != roleWorker:
		return false
	case writeTools[t]:
		var ti struct {
			FilePath     string `json:"file_path"`
			Path         string `json:"path"`
			NotebookPath string `json:"notebook_path"`
		}
		if json.Unmarshal(in.ToolInput, &ti) != nil {
			return false
		}
		p := cmp.Or(ti.FilePath, ti.NotebookPath, ti.Path)
		return l.writable(p, in.Cwd)
	case shellTools[t]:
		var ti struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(in.ToolInput, &ti) != nil || ti.Command == "" {
			return false
		}
		return !l.shellTouches(ti.Command, in.Cwd, getenv)
	}
	return false
}
