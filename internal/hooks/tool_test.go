package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aot-loop/aot/internal/runlock"
)

// guardProject is a project whose owner session S1 runs the loop, with the
// links the cases below spell paths through, and a folder outside it.
func guardProject(t *testing.T) (root, outside, path string) {
	t.Helper()
	root, path = project(t, stateText)
	outside = t.TempDir()
	own(t, path, Claude, "S1")
	for _, d := range []string{filepath.Join(root, "src"), filepath.Join(outside, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"out":      outside,                                     // a folder outside
		"esc.txt":  filepath.Join(outside, "missing.txt"),       // dangling: a file not created yet
		"esc2":     filepath.Join(outside, "nodir", "file.txt"), // dangling, through a missing folder
		"st":       ".claude/aot-loop-state.md",                 // the state file
		"cfg":      ".claude",                                   // the .claude folder
		"deep":     filepath.Join(outside, "sub"),               // deep/.. is outside, not the project
		"loop1":    "loop2",
		"loop2":    "loop1",
		"lib":      "src", // a link that stays inside
		"dangling": ".claude/new.md",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside, path
}

// TestToolGuard is the table of docs/HOOKS.md (The tool hook): what the
// owner's worker session may write and run without being asked. Every
// refusal is "no decision": the client asks the person.
func TestToolGuard(t *testing.T) {
	root, outside, path := guardProject(t)
	env := map[string]string{"AOT_STATE_FILE": path, "HOME": outside}
	o := opts(Claude, PreToolUse)
	o.Getenv = func(k string) string { return env[k] }
	write := func(p string) Input {
		in, _ := json.Marshal(map[string]string{"file_path": p, "content": "x"})
		return Input{SessionID: "S1", Cwd: root, ToolName: "Write", ToolInput: in}
	}
	bash := func(c string) Input {
		in, _ := json.Marshal(map[string]string{"command": c})
		return Input{SessionID: "S1", Cwd: root, ToolName: "Bash", ToolInput: in}
	}
	tests := []struct {
		name  string
		in    Input
		allow bool
	}{
		{"write relative inside", write("src/a.go"), true},
		{"write absolute inside", write(filepath.Join(root, "src", "b.go")), true},
		{"write through a link that stays inside", write("lib/c.go"), true},
		{"write outside", write("/etc/passwd"), false},
		{"write .. out of the project", write(filepath.Join(root, "..", "x.txt")), false},
		{"write the project folder itself", write(root), false},
		{"write the state file", write(".claude/aot-loop-state.md"), false},
		{"write the state file, other case", write(".Claude/aot-loop-state.md"), false},
		{"write the state file through ..", write("src/../.claude/aot-loop-state.md"), false},
		{"write the client's settings", write(".claude/settings.json"), false},
		{"write .git", write(".git/config"), false},
		{"write through a folder link outside", write("out/new.txt"), false},
		{"write through a dangling link to a missing file outside", write("esc.txt"), false},
		{"write through a dangling link into a missing folder outside", write("esc2"), false},
		{"write through a link to the state file", write("st"), false},
		{"write through a link to .claude", write("cfg/aot-loop/events.ndjson"), false},
		{"write through a dangling link into .claude", write("dangling"), false},
		{"write link/.. climbs from the link's target", write("deep/../x.txt"), false},
		{"write through a link loop", write("loop1"), false},

		{"bash plain", bash("go test ./..."), true},
		{"bash redirect inside", bash("echo hi > out.txt"), true},
		{"bash quoted glob is literal", bash("grep -E '.*' src/a.go"), true},
		{"bash glob not over .claude", bash("ls src/*.go"), true},
		{"bash brace range", bash("for i in {1..3}; do echo $i; done"), true},
		{"bash aot command", bash("aot atom set A1 resolved"), true},
		{"bash here-document is data", bash("cat > notes.md <<'EOF'\n* one\n* two $(x)\nEOF\necho ok"), true},
		{"bash here-document that substitutes a command", bash("cat > notes.md <<EOF\n$(rm -rf x)\nEOF"), false},
		{"bash here-document naming .claude", bash("sh <<'EOF'\nrm -rf .claude\nEOF"), false},
		{"bash rm the loop folder", bash("rm -rf .claude/aot-loop"), false},
		{"bash rm the loop folder, slash", bash("rm -rf .claude/aot-loop/"), false},
		{"bash rm .claude", bash("rm -rf .claude"), false},
		{"bash rm .claude, other case", bash("rm -rf .CLAUDE"), false},
		{"bash sed glob over the state file", bash("sed -i s/x/y/ .claude/*.md"), false},
		{"bash glob matching .claude", bash("sed -i s/x/y/ .c*/*.md"), false},
		{"bash ? glob", bash("rm -rf .cla?de"), false},
		{"bash [] glob", bash("rm -rf .[c]laude"), false},
		{"bash * in the project (dotglob may be on)", bash("rm -rf *"), false},
		{"bash glob after cd", bash("cd .. && rm -rf */.c*"), false},
		{"bash braces", bash("rm -rf .{claude,x}"), false},
		{"bash quoted", bash(`rm -rf ".cl"aude`), false},
		{"bash escaped", bash(`rm -rf .cl\aude`), false},
		{"bash variable", bash("d=.claude; rm -rf $d"), false},
		{"bash variables joined", bash(`a=.cl; b=aude; rm -rf "$a$b"`), false},
		{"bash inherited variable", bash(`rm -f "$AOT_STATE_FILE"`), false},
		{"bash ${} operator", bash("rm -rf ${d:-x}"), false},
		{"bash command substitution", bash("rm -rf $(printf .cl)aude"), false},
		{"bash backquotes", bash("rm -rf `printf .cl`aude"), false},
		{"bash ANSI-C quoting", bash(`rm -rf $'\x2e'claude`), false},
		{"bash eval", bash("eval rm -rf x"), false},
		{"bash here-document after a comment", bash("cat > n.md <<'EOF' # notes\n* one\nEOF"), true},
		{"bash cd - (a folder the text does not name)", bash("cd - && rm -rf x"), false},
		{"bash through a link to .claude", bash("rm -rf cfg/aot-loop"), false},
		{"bash through a link after cd", bash("cd src && rm -rf ../cfg"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(path)
			d, err := Decide(context.Background(), o, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Action == Allow; got != tc.allow {
				t.Errorf("approved = %v, want %v (%s)", got, tc.allow, tc.in.ToolInput)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("the state file changed")
			}
		})
	}
}

// TestForeignSessionsLeaveTheLoopAlone: a running loop with no owner (no
// session started it) or owned by S1 is not touched by any other session's
// hooks: no decision, not a byte written, no owner recorded. A loop that
// aot run's engine holds is left alone even by its owner.
func TestForeignSessionsLeaveTheLoopAlone(t *testing.T) {
	dir, path := project(t, stateText)
	before, _ := os.ReadFile(path)
	calls := []struct {
		ev Event
		in Input
	}{
		{Stop, Input{SessionID: "S2", Cwd: dir, HookEventName: "Stop"}},
		{Stop, Input{SessionID: "S2", Cwd: dir, HookEventName: "Stop", StopHookActive: true}},
		{SubagentStop, Input{SessionID: "S2", Cwd: dir, AgentType: "aot-loop:coordinator"}},
		{PreToolUse, Input{SessionID: "S2", Cwd: dir, ToolName: "Read", ToolInput: json.RawMessage(`{"file_path":"a"}`)}},
	}
	check := func(when string) {
		t.Helper()
		for _, c := range calls {
			d, err := Decide(context.Background(), opts(Claude, c.ev), c.in)
			if err != nil || d.Action != None {
				t.Errorf("%s, %s: %+v, %v; want no decision", when, c.ev, d, err)
			}
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Errorf("%s: the state file changed", when)
		}
	}
	check("no owner")
	if _, err := os.Stat(filepath.Dir(OwnerPath(path))); err == nil {
		t.Error("a hook created the loop's folder")
	}
	own(t, path, Claude, "S1")
	check("owned by S1")
	if ow, _ := ReadOwner(path); !ow.owns(Claude, "S1") {
		t.Errorf("owner %+v, want S1", ow)
	}

	lock, err := runlock.Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	for _, ev := range []Event{Stop, PreToolUse} {
		in := Input{SessionID: "S1", Cwd: dir, ToolName: "Read", ToolInput: json.RawMessage(`{}`)}
		if d, err := Decide(context.Background(), opts(Claude, ev), in); err != nil || d.Action != None {
			t.Errorf("engine running, owner's %s: %+v, %v", ev, d, err)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the state file changed under the engine")
	}
}
