package hooks

import (
	"encoding/json"
	"path/filepath"
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
	l, err := gate(o, in, false)
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
	if !permitted(r, in, l) {
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
// inside the project (never the loop's own files) and shell commands that
// do not name them, for workers only.
func permitted(r role, in Input, l *loop) bool {
	t := in.ToolName
	switch {
	case readTools[t]:
		return true
	case agentTools[t]:
		return r == roleWorker || r == roleCoordinator
	case r != roleWorker:
		return false
	case writeTools[t]:
		return writableTarget(in.ToolInput, l)
	case shellTools[t]:
		var ti struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(in.ToolInput, &ti) != nil || ti.Command == "" {
			return false
		}
		return !namesLoopFiles(ti.Command)
	}
	return false
}

// namesLoopFiles reports whether text names the state file or the aot-loop
// folder: changes to them go through aot's commands, and anything else is
// left to the person.
func namesLoopFiles(text string) bool {
	return strings.Contains(text, "aot-loop-state") || strings.Contains(text, "aot-loop/") || strings.Contains(text, "aot-loop\\")
}

// writableTarget reports whether a write tool's file is inside the project
// and is not one of the loop's own files.
func writableTarget(raw json.RawMessage, l *loop) bool {
	var ti struct {
		FilePath     string `json:"file_path"`
		Path         string `json:"path"`
		NotebookPath string `json:"notebook_path"`
	}
	if json.Unmarshal(raw, &ti) != nil {
		return false
	}
	p := ti.FilePath
	if p == "" {
		p = ti.NotebookPath
	}
	if p == "" {
		p = ti.Path
	}
	if p == "" || namesLoopFiles(filepath.ToSlash(p)) {
		return false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(l.root, p)
	}
	root := l.root
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	p = realish(filepath.Clean(p))
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return false
	}
	// The .claude folder holds the client's settings and the loop's files.
	first := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
	return first != ".claude" && first != ".git"
}

// realish resolves the symbolic links of the longest existing prefix of p,
// so that a link inside the project cannot lead a write outside it.
func realish(p string) string {
	rest := ""
	for cur := p; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}
