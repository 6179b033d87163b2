//go:build linux

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/state"
)

// alignModel asks which port until it is told, then proposes three atoms.
const alignModel = `n=1; while [ -f task-$n.json ]; do n=$((n+1)); done
cat > task-$n.json
q='"clarifications": ["Which port?"],'
grep -q 'A: 8080' task-$n.json && q='"clarifications": [],'
cat <<EOF
{"goal": "Add a /health endpoint", "background_intent": "Load balancers need a probe",
 "deliverables": "GET /health and a test", $q
 "scope": {"in": ["the HTTP server"], "out": ["metrics"]},
 "base_case": {"checklist": [
   {"item": "tests pass", "check": {"type": "command", "value": "go test ./..."}},
   {"item": "handler", "check": {"type": "file", "value": "health.go"}}]},
 "atoms": [{"id": "A1", "description": "Write the handler", "depends_on": []},
   {"id": "A2", "description": "Write the test", "depends_on": ["A1"]},
   {"id": "A3", "description": "Document it", "depends_on": ["A1", "A2"]}]}
EOF
`

// A person at a terminal answers the model's question, edits the goal,
// removes an atom, accepts the rest and has the state written.
func TestAlignDialogueOnATerminal(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs a POSIX shell")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model.sh"), []byte(alignModel), 0o644); err != nil {
		t.Fatal(err)
	}
	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	cmd := exec.Command(os.Args[0], "align", "--agent-command", "sh model.sh", "add a health endpoint")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AOT_TEST_AS_AOT=1", "NO_COLOR=1", "AOT_STATE_FILE=")
	cmd.Stdin, cmd.Stdout = tty, tty
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var screen lockedBuffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ended := false
	defer func() {
		if !ended {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	// seen is how much of the screen earlier prompts used up: each prompt
	// is looked for after it.
	seen := 0
	wait := func(prompt string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			s := screen.String()
			if i := strings.Index(s[seen:], prompt); i >= 0 {
				seen += i + len(prompt)
				break
			}
			select {
			case err := <-exited:
				ended = true
				t.Fatalf("aot align ended (%v) before %q:\n%s\nstderr:\n%s", err, prompt, s, stderr.String())
			case <-deadline:
				t.Fatalf("no %q within 20s:\n%s\nstderr:\n%s", prompt, s, stderr.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	say := func(prompt, line string) {
		t.Helper()
		wait(prompt)
		if _, err := ptmx.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	accept := "a (or Enter) accept, e edit, r redo with a comment: "
	say("1. Which port?\r\n  answer: ", "8080")
	wait("── Goal ──")
	say(accept, "e")
	say("new goal (one line; empty keeps it): ", "Serve /health on port 8080")
	say("Serve /health on port 8080\r\n"+accept, "")
	for _, part := range []string{"Background intent", "Deliverables", "Scope: in", "Scope: out", "Base case (checklist)", "Definition of done"} {
		wait("── " + part + " ──")
		say(accept, "")
	}
	wait("── First atoms ──")
	say(accept, "e")
	say("  edit: ", "-A2")
	wait("removed A2 from the dependencies of A3")
	say("  edit: ", "")
	say(accept, "")
	say("passes aot gate: 2 check(s), 2 atom(s).\r\nWrite .claude/aot-loop-state.md? y (or Enter) yes, e edit again, q quit: ", "y")

	select {
	case err := <-exited:
		ended = true
		if err != nil {
			t.Fatalf("aot align: %v\n%s\nstderr:\n%s", err, screen.String(), stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("aot align did not end:\n%s", screen.String())
	}
	s, err := state.NewStore(filepath.Join(dir, state.DefaultPath)).Read()
	if err != nil {
		t.Fatalf("%v\n%s", err, screen.String())
	}
	if p := s.GateMissing(); len(p) > 0 {
		t.Errorf("the written state does not pass the gate: %v", p)
	}
	if s.Objective.Goal != "Serve /health on port 8080" {
		t.Errorf("goal = %q", s.Objective.Goal)
	}
	var atoms []string
	for _, a := range s.Atoms {
		atoms = append(atoms, a.ID+"<"+strings.Join(a.DependsOn, ","))
	}
	if got := strings.Join(atoms, " "); got != "A1< A3<A1" {
		t.Errorf("atoms = %s", got)
	}
	if len(s.Objective.BaseCase.Checklist) != 2 || !strings.Contains(s.Body, "Which port?\n  8080") {
		t.Errorf("checklist = %+v, body = %q", s.Objective.BaseCase.Checklist, s.Body)
	}
	task, err := os.ReadFile(filepath.Join(dir, "task-2.json"))
	if err != nil || !strings.Contains(string(task), "A: 8080") {
		t.Errorf("the second task lacks the answer (%v): %s", err, task)
	}
}
