package hooks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// stateText is a running loop with two atoms, A2 waiting on A1.
const stateText = `---
objective:
  goal: "Ship it"
  base_case:
    checklist:
      - item: "done file"
        check:
          type: file
          value: "done.txt"
  background_intent: "why"
  deliverables: "what"
  definition_of_done: "done"
  constraints:
    max_iterations: 5
    max_parallel_agents: 3
    max_stall_count: 2

control:
  status: running
  iteration: 1
  stall_count: 0
  prev_pending_count: -1
  stop_requested: false
  stop_reason: null
  redirect_requested: false

atoms:
  - id: A1
    description: "Write the code"
    status: pending
    depends_on: []
  - id: A2
    description: "Test the code"
    status: pending
    depends_on: [A1]

decompositions: []
or_groups: {}
bindings: {}
trail: []
corrections: []
---
body
`

// payload is one recorded hook call of a real CLI.
type payload struct {
	Label   string         `json:"label"`
	Payload map[string]any `json:"payload"`
}

// recorded loads the payloads a CLI sent to its hooks
// (testdata/*-hook-payloads.jsonl, recorded against the fake model).
func recorded(t *testing.T, client string) []payload {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", client+"-hook-payloads.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []payload
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var p payload
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// first returns the first recorded payload with label and, when given,
// matching fields, as hook input JSON pointed at dir.
func first(t *testing.T, client, label, dir string, match func(map[string]any) bool) Input {
	t.Helper()
	for _, p := range recorded(t, client) {
		if p.Label != label || (match != nil && !match(p.Payload)) {
			continue
		}
		p.Payload["cwd"] = dir
		data, _ := json.Marshal(p.Payload)
		in, err := ParseInput(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	t.Fatalf("no %s payload labelled %s", client, label)
	return Input{}
}

func project(t *testing.T, text string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// own records session as the owner of path's loop, as `aot control status
// running` does when run by the session's shell tool.
func own(t *testing.T, path string, c Client, session string) {
	t.Helper()
	name := map[Client]string{Claude: "CLAUDE_CODE_SESSION_ID", Codex: "CODEX_THREAD_ID", Gemini: "GEMINI_SESSION_ID"}[c]
	getenv := func(k string) string {
		if k == name {
			return session
		}
		return ""
	}
	if ok, err := RecordOwner(path, getenv, time.Now()); !ok || err != nil {
		t.Fatalf("record the owner: %v, %v", ok, err)
	}
}

func opts(c Client, ev Event) Options {
	return Options{Client: c, Event: ev, Getenv: func(string) string { return "" },
		Now: func() time.Time { return time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) }}
}

func read(t *testing.T, path string) *state.State {
	t.Helper()
	s, err := state.NewStore(path).Read()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func noActive(p map[string]any) bool { return p["stop_hook_active"] == false }
func active(p map[string]any) bool   { return p["stop_hook_active"] == true }

// stops are the continuation hooks of the three CLIs, as recorded.
var stops = []struct {
	client Client
	event  Event
	label  string
}{
	{Claude, Stop, "Stop"},
	{Codex, Stop, "Stop"},
	{Gemini, AfterAgent, "Stop"}, // Gemini's AfterAgent, recorded under the label Stop
}

func TestContinuationOnRecordedPayloads(t *testing.T) {
	for _, tc := range stops {
		t.Run(string(tc.client), func(t *testing.T) {
			dir, path := project(t, stateText)
			in := first(t, string(tc.client), tc.label, dir, noActive)
			o := opts(tc.client, tc.event)
			own(t, path, tc.client, in.SessionID)

			d, err := Decide(context.Background(), o, in)
			if err != nil || d.Action != Block {
				t.Fatalf("first stop: %+v, %v; want a block", d, err)
			}
			if !strings.Contains(d.Reason, "A1: Write the code") || strings.Contains(d.Reason, "A2") {
				t.Errorf("reason should name A1 only:\n%s", d.Reason)
			}
			out := Render(tc.client, tc.event, d)
			var doc map[string]string
			if err := json.Unmarshal(out, &doc); err != nil || doc["decision"] != "block" || doc["reason"] != d.Reason {
				t.Errorf("rendered %s", out)
			}
			if _, has := doc["systemMessage"]; has != (tc.client == Claude) {
				t.Errorf("systemMessage only for Claude: %s", out)
			}
			s := read(t, path)
			if s.Control.Iteration != 2 || s.Control.PrevPendingCount != 2 || s.Control.StallCount != 0 {
				t.Errorf("control after first stop: %+v", s.Control)
			}
			if ow, _ := ReadOwner(path); !ow.owns(tc.client, in.SessionID) {
				t.Errorf("owner %+v, want session %s", ow, in.SessionID)
			}

			// The client's second call, with stop_hook_active: no decision.
			again := first(t, string(tc.client), tc.label, dir, active)
			before, _ := os.ReadFile(path)
			if d, err := Decide(context.Background(), o, again); err != nil || d.Action != None {
				t.Errorf("stop_hook_active: %+v, %v", d, err)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Error("stop_hook_active changed the file")
			}

			// Another session: left alone.
			other := in
			other.SessionID = "someone-else"
			if d, err := Decide(context.Background(), o, other); err != nil || d.Action != None {
				t.Errorf("foreign session: %+v, %v", d, err)
			}

			// No progress twice: stall 1 (named), then the bound stops the loop.
			d, _ = Decide(context.Background(), o, in)
			if d.Action != Block || !strings.Contains(d.Reason, "stall 1 of 2") {
				t.Errorf("stall 1: %+v", d)
			}
			d, _ = Decide(context.Background(), o, in)
			if d.Action != End || !strings.Contains(d.Message, "stall: 2 stops") {
				t.Errorf("stall bound: %+v", d)
			}
			if got := Render(tc.client, tc.event, d); !bytes.HasPrefix(got, []byte(`{"systemMessage":"AoT Loop stopped: stall`)) {
				t.Errorf("rendered %s", got)
			}
			if s := read(t, path); s.Control.Status != state.ControlStopped || s.Control.StopReason == nil {
				t.Errorf("control after the bound: %+v", s.Control)
			}
			if ow, _ := ReadOwner(path); ow != nil {
				t.Errorf("owner kept after the loop stopped: %+v", ow)
			}
			// Stopped: no decision.
			if d, err := Decide(context.Background(), o, in); err != nil || d.Action != None {
				t.Errorf("stopped loop: %+v, %v", d, err)
			}
		})
	}
}

func TestBaseCase(t *testing.T) {
	resolved := strings.ReplaceAll(stateText, "status: pending", "status: resolved")
	for _, tc := range stops {
		t.Run(string(tc.client), func(t *testing.T) {
			dir, path := project(t, resolved)
			in := first(t, string(tc.client), tc.label, dir, noActive)
			o := opts(tc.client, tc.event)
			own(t, path, tc.client, in.SessionID)
			runs := 0
			o.Verify = func(ctx context.Context, bc *state.BaseCase, root string) (verify.Report, error) {
				runs++
				if root != dir {
					t.Errorf("base case run in %s, want %s", root, dir)
				}
				return verify.BaseCase(ctx, bc, verify.Options{Dir: root})
			}
			d, err := Decide(context.Background(), o, in)
			if err != nil || d.Action != Block || !strings.Contains(d.Reason, "base case fails") || !strings.Contains(d.Reason, "done file") {
				t.Fatalf("failing base case: %+v, %v", d, err)
			}
			if err := os.WriteFile(filepath.Join(dir, "done.txt"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			d, err = Decide(context.Background(), o, in)
			if err != nil || d.Action != End || !strings.Contains(d.Message, "completed") {
				t.Fatalf("passing base case: %+v, %v", d, err)
			}
			if s := read(t, path); s.Control.Status != state.ControlCompleted {
				t.Errorf("status %s, want completed", s.Control.Status)
			}
			if runs != 2 {
				t.Errorf("base case run %d times, want 2", runs)
			}
		})
	}
}

// TestStopHookActiveNeedsProgress: Claude Code keeps stop_hook_active set
// for every stop after a hook's block until the next prompt, so a session
// with that flag is kept going again only when it resolved atoms since the
// last stop, and may complete the loop.
func TestStopHookActiveNeedsProgress(t *testing.T) {
	dir, path := project(t, stateText)
	o := opts(Claude, Stop)
	cont := first(t, "claude", "Stop", dir, active)
	own(t, path, Claude, cont.SessionID)
	if d, _ := Decide(context.Background(), o, first(t, "claude", "Stop", dir, noActive)); d.Action != Block {
		t.Fatalf("first stop: %+v", d)
	}
	resolve := func(id string) {
		t.Helper()
		for _, st := range []string{state.StatusInProgress, state.StatusResolved} {
			_, err := state.NewStore(path).Update(func(s *state.State) error {
				for i := range s.Atoms {
					if s.Atoms[i].ID == id {
						s.Atoms[i].Status = st
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	resolve("A1")
	d, err := Decide(context.Background(), o, cont)
	if err != nil || d.Action != Block || !strings.Contains(d.Reason, "A2: Test the code") {
		t.Fatalf("progress under stop_hook_active: %+v, %v; want a block naming A2", d, err)
	}
	before, _ := os.ReadFile(path)
	if d, err := Decide(context.Background(), o, cont); err != nil || d.Action != None {
		t.Errorf("no progress under stop_hook_active: %+v, %v", d, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("no progress under stop_hook_active changed the file")
	}
	resolve("A2")
	if err := os.WriteFile(filepath.Join(dir, "done.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := Decide(context.Background(), o, cont); err != nil || d.Action != End || !strings.Contains(d.Message, "completed") {
		t.Errorf("done under stop_hook_active: %+v, %v; want the loop completed", d, err)
	}
}

func TestContinuationBranches(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(string) string
		want    Action
		message string
		status  string
	}{
		{"stop requested", func(s string) string {
			return strings.Replace(s, "stop_requested: false", "stop_requested: true", 1)
		}, End, "manual stop requested", state.ControlStopped},
		{"redirect in progress", func(s string) string {
			return strings.Replace(s, "redirect_requested: false", "redirect_requested: true", 1)
		}, None, "", state.ControlRunning},
		{"max iterations", func(s string) string {
			return strings.Replace(s, "iteration: 1", "iteration: 4", 1)
		}, End, "max_iterations: 5 of 5", state.ControlStopped},
		{"pending loop", func(s string) string {
			return strings.Replace(s, "status: running", "status: pending", 1)
		}, None, "", state.ControlPending},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, path := project(t, tc.edit(stateText))
			in := first(t, "claude", "Stop", dir, noActive)
			own(t, path, Claude, in.SessionID)
			d, err := Decide(context.Background(), opts(Claude, Stop), in)
			if err != nil || d.Action != tc.want || !strings.Contains(d.Message, tc.message) {
				t.Fatalf("got %+v, %v; want action %d with %q", d, err, tc.want, tc.message)
			}
			if s := read(t, path); s.Control.Status != tc.status {
				t.Errorf("status %s, want %s", s.Control.Status, tc.status)
			}
		})
	}
}

func TestInvalidStateRunsNothing(t *testing.T) {
	dir, path := project(t, strings.Replace(stateText, "iteration: 1", "iteration: HOME[$(touch pwned)]", 1))
	before, _ := os.ReadFile(path)
	for _, tc := range stops {
		in := first(t, string(tc.client), tc.label, dir, noActive)
		own(t, path, tc.client, in.SessionID)
		d, err := Decide(context.Background(), opts(tc.client, tc.event), in)
		if err == nil || d.Action != None || !strings.Contains(err.Error(), "iteration") {
			t.Errorf("%s: %+v, %v; want an error naming the iteration and no decision", tc.client, d, err)
		}
	}
	in := first(t, "claude", "PreToolUse", dir, nil)
	own(t, path, Claude, in.SessionID)
	if d, err := Decide(context.Background(), opts(Claude, PreToolUse), in); d.Action != None || err == nil {
		t.Errorf("pre-tool-use: %+v, %v; want an error and no decision", d, err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("the file changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("the command ran")
	}
}

func TestSubagentStop(t *testing.T) {
	dir, path := project(t, stateText)
	in := first(t, "claude", "SubagentStop", dir, nil)
	own(t, path, Claude, in.SessionID)
	// A general-purpose subagent may finish: the session's Stop counts.
	if d, err := Decide(context.Background(), opts(Claude, SubagentStop), in); err != nil || d.Action != None {
		t.Fatalf("general-purpose subagent: %+v, %v", d, err)
	}
	if s := read(t, path); s.Control.Iteration != 1 {
		t.Errorf("iteration %d, want 1", s.Control.Iteration)
	}
	in.AgentType = "aot-loop:coordinator"
	if d, err := Decide(context.Background(), opts(Claude, SubagentStop), in); err != nil || d.Action != Block {
		t.Fatalf("coordinator: %+v, %v", d, err)
	}
}

func TestToolHookOnRecordedPayloads(t *testing.T) {
	tools := []struct {
		client Client
		event  Event
		label  string
	}{{Claude, PreToolUse, "PreToolUse"}, {Codex, PreToolUse, "PreToolUse"}, {Gemini, BeforeTool, "BeforeTool"}}
	for _, tc := range tools {
		t.Run(string(tc.client), func(t *testing.T) {
			dir, path := project(t, stateText)
			shell := first(t, string(tc.client), tc.label, dir, func(p map[string]any) bool {
				return (p["tool_name"] == "Bash" || p["tool_name"] == "run_shell_command") && p["agent_id"] == nil
			})
			o := opts(tc.client, tc.event)
			// Not owned: no decision.
			if d, err := Decide(context.Background(), o, shell); err != nil || d.Action != None {
				t.Fatalf("unowned: %+v, %v", d, err)
			}
			own(t, path, tc.client, shell.SessionID)
			d, err := Decide(context.Background(), o, shell)
			if err != nil || d.Action != Allow {
				t.Fatalf("owned shell: %+v, %v", d, err)
			}
			out := Render(tc.client, tc.event, d)
			switch tc.client {
			case Claude:
				if !bytes.Contains(out, []byte(`"permissionDecision":"allow"`)) {
					t.Errorf("rendered %s", out)
				}
			case Codex:
				if out != nil {
					t.Errorf("codex cannot take an allow, rendered %s", out)
				}
			case Gemini:
				if !bytes.HasPrefix(out, []byte(`{"decision":"allow"`)) {
					t.Errorf("rendered %s", out)
				}
			}
			// The subagent's recorded tool call (Claude, Codex) as a probe: a
			// shell command is not read-only.
			if tc.client != Gemini {
				sub := first(t, string(tc.client), tc.label, dir, func(p map[string]any) bool { return p["agent_id"] != nil })
				if d, _ := Decide(context.Background(), o, sub); d.Action != Allow {
					t.Errorf("worker subagent: %+v", d)
				}
				sub.AgentType = "aot-loop:probe"
				if d, _ := Decide(context.Background(), o, sub); d.Action != None {
					t.Errorf("probe shell: %+v", d)
				}
				sub.AgentType = "aot-verifier"
				if d, _ := Decide(context.Background(), o, sub); d.Action != None {
					t.Errorf("verifier shell: %+v", d)
				}
			}
			// Stopped loop: nothing approved.
			if _, err := state.NewStore(path).Update(func(s *state.State) error {
				s.Control.Status = state.ControlStopped
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if d, _ := Decide(context.Background(), o, shell); d.Action != None {
				t.Errorf("stopped: %+v", d)
			}
		})
	}
}

func TestPermitted(t *testing.T) {
	root, path := project(t, stateText)
	l := &loop{root: root, path: path}
	in := func(agent, tool, input string) Input {
		return Input{AgentType: agent, ToolName: tool, ToolInput: json.RawMessage(input)}
	}
	tests := []struct {
		name string
		in   Input
		want bool
	}{
		{"worker read", in("", "Read", `{"file_path":"/etc/hosts"}`), true},
		{"worker write inside", in("", "Write", `{"file_path":"`+root+`/a/b.go"}`), true},
		{"worker write relative", in("", "Edit", `{"file_path":"a.go"}`), true},
		{"worker write outside", in("", "Write", `{"file_path":"/etc/passwd"}`), false},
		{"worker write escape", in("", "Write", `{"file_path":"`+root+`/../x"}`), false},
		{"worker write state", in("", "Write", `{"file_path":"`+root+`/.claude/aot-loop-state.md"}`), false},
		{"worker write settings", in("", "Write", `{"file_path":"`+root+`/.claude/settings.json"}`), false},
		{"worker write git", in("", "Write", `{"file_path":"`+root+`/.git/config"}`), false},
		{"worker shell", in("", "Bash", `{"command":"go test ./..."}`), true},
		{"worker shell on state", in("", "Bash", `{"command":"sed -i s/x/y/ .claude/aot-loop-state.md"}`), false},
		{"worker shell empty", in("", "Bash", `{}`), false},
		{"worker agent", in("", "Agent", `{}`), true},
		{"worker web", in("", "WebFetch", `{}`), false},
		{"worker mcp", in("", "mcp__x__y", `{}`), false},
		{"probe read", in("aot-loop:probe", "Grep", `{}`), true},
		{"probe write", in("aot-loop:probe", "Write", `{"file_path":"a.go"}`), false},
		{"probe shell", in("aot-loop:probe", "Bash", `{"command":"ls"}`), false},
		{"verifier notebook", in("verifier", "NotebookEdit", `{"notebook_path":"a.ipynb"}`), false},
		{"coordinator agent", in("aot-loop:coordinator", "Agent", `{}`), true},
		{"coordinator write", in("aot-loop:coordinator", "Write", `{"file_path":"a.go"}`), false},
		{"other plugin's probe is a worker", in("other:probe", "Read", `{}`), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := permitted(roleOf(tc.in.AgentType), tc.in, l, func(string) string { return "" }); got != tc.want {
				t.Errorf("permitted = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEngineRunningAndAgentsOfAot(t *testing.T) {
	dir, _ := project(t, stateText)
	in := first(t, "claude", "Stop", dir, noActive)
	o := opts(Claude, Stop)
	o.Getenv = func(k string) string {
		if k == "AOT_ROLE" {
			return "worker"
		}
		return ""
	}
	if d, err := Decide(context.Background(), o, in); err != nil || d.Action != None {
		t.Errorf("inside an agent of aot run: %+v, %v", d, err)
	}
}

func TestRecordOwner(t *testing.T) {
	_, path := project(t, stateText)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	if ok, err := RecordOwner(path, func(string) string { return "" }, now); ok || err != nil {
		t.Fatalf("outside a session: %v, %v", ok, err)
	}
	env := map[string]string{"CLAUDE_CODE_SESSION_ID": "abc"}
	if ok, err := RecordOwner(path, func(k string) string { return env[k] }, now); !ok || err != nil {
		t.Fatalf("inside a session: %v, %v", ok, err)
	}
	ow, err := ReadOwner(path)
	if err != nil || !ow.owns(Claude, "abc") || ow.How != "start" {
		t.Fatalf("owner %+v, %v", ow, err)
	}
	fi, err := os.Stat(OwnerPath(path))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("owner file mode %v, %v; want 0600", fi.Mode(), err)
	}
	// Started again from a Codex session: that session owns it now.
	codex := map[string]string{"CODEX_THREAD_ID": "thread-1"}
	if ok, err := RecordOwner(path, func(k string) string { return codex[k] }, now); !ok || err != nil {
		t.Fatalf("from a Codex session: %v, %v", ok, err)
	}
	if ow, _ := ReadOwner(path); !ow.owns(Codex, "thread-1") || ow.owns(Claude, "abc") {
		t.Errorf("owner %+v, want the Codex thread", ow)
	}
	// Started again outside every session: nobody owns it.
	if ok, err := RecordOwner(path, func(string) string { return "" }, now); ok || err != nil {
		t.Fatalf("outside a session again: %v, %v", ok, err)
	}
	if ow, err := ReadOwner(path); ow != nil || err != nil {
		t.Errorf("owner %+v, %v after a start outside every session; want none", ow, err)
	}
	if ok, err := RecordOwner(path, func(k string) string { return env[k] }, now); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := os.WriteFile(OwnerPath(path), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadOwner(path); err == nil {
		t.Error("a garbage owner file should be an error")
	}
}
