//go:build temporal && unix

package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// A loop that brings its own command (aot run --agent-command) runs it on
// a worker only where the worker allows it: a worker with an agent of its
// own refuses it (the script never runs; aot run stops at once, exit 1,
// naming the worker and the command) and runs its own agent for a loop
// that names none; a worker whose --allow-loop-command pattern matches
// the command runs it.
func TestWorkersRunOnlyTheCommandsTheyAllow(t *testing.T) {
	start := aotProcesses(t)
	agents := filepath.Join(t.TempDir(), "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "the-loop-command-ran")
	script := func(name, body string) string {
		p := filepath.Join(agents, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return "sh " + p
	}
	writes := `echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt"; echo '{"success": true, "summary": "wrote it"}'` + "\n"
	own := script("own.sh", writes)
	brought := script("mark.sh", "echo ran >> "+marker+"\n"+writes)

	exit := func(c *exec.Cmd, out *lockedBuffer) int {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return ee.ExitCode()
			}
			if err != nil {
				t.Fatalf("aot run: %v\n%s", err, out)
			}
			return 0
		case <-time.After(2 * time.Minute):
			t.Fatalf("aot run did not end within 2 minutes:\n%s", out)
		}
		return -1
	}

	// A worker with an agent of its own refuses the loop's command.
	root, _, ws, sf := temporalProject(t, "file A", "test -f A.txt", 1, state.Atom{ID: "A", Description: "write A.txt"})
	_, wout := start("refuser", ws, "worker", "--task-queue", "refuse", "--cache", filepath.Join(root, "cache"), "--identity", "refuser",
		"--grace", "1s", "--agent-command", own)
	until(t, "the refusing worker polls", 60*time.Second, func() bool { return strings.Contains(wout.String(), "polling task queue refuse") })
	run, out := start("aot run, refused", ws, "run", "--engine", "temporal", "--task-queue", "refuse", "--agent", "exec", "--agent-command", brought)
	if code := exit(run, out); code != 1 {
		t.Errorf("aot run of a refused command exited %d, want 1 (error):\n%s", code, out)
	}
	for _, want := range []string{
		"workers must allow", // aot run's warning, before the loop starts
		`stopped (error): worker refuser refused the command "` + brought + `"`,
		"--allow-loop-command PATTERN",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("aot run did not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the loop's command ran on the worker that refused it (%v)", err)
	}
	// The loop stopped at the first refusal instead of spending the
	// atom's attempts.
	evs, err := journal.Read(journal.PathFor(sf))
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	for _, ev := range evs {
		if ev.Type == journal.AtomStart {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("%d attempts started, want 1: the first refusal stops the loop", starts)
	}
	if st, err := state.NewStore(sf).Read(); err != nil || st.Control.Status != state.ControlStopped {
		t.Errorf("the local state after the refusal: %v %+v", err, st.Control)
	}

	// A loop that names no agent runs the worker's own.
	_, _, ws2, _ := temporalProject(t, "file A", "test -f A.txt", 1, state.Atom{ID: "A", Description: "write A.txt"})
	run, out = start("aot run, the worker's agent", ws2, "run", "--engine", "temporal", "--task-queue", "refuse")
	if code := exit(run, out); code != 0 || !strings.Contains(out.String(), "completed (completed)") || strings.Contains(out.String(), "workers must allow") {
		t.Errorf("aot run with the worker's own agent exited %d:\n%s", code, out)
	}
	if got, err := os.ReadFile(filepath.Join(ws2, "A.txt")); err != nil || string(got) != "A\n" {
		t.Errorf("the work of the worker's own agent did not land: %q %v", got, err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the loop's command ran (%v)", err)
	}

	// A worker whose pattern matches the command runs it (it has no
	// agent of its own).
	root, _, ws, _ = temporalProject(t, "file A", "test -f A.txt", 1, state.Atom{ID: "A", Description: "write A.txt"})
	_, wout = start("allower", ws, "worker", "--task-queue", "allow", "--cache", filepath.Join(root, "cache"), "--identity", "allower",
		"--grace", "1s", "--allow-loop-command", "sh "+agents+"/*.sh")
	until(t, "the allowing worker polls", 60*time.Second, func() bool { return strings.Contains(wout.String(), "polling task queue allow") })
	run, out = start("aot run, allowed", ws, "run", "--engine", "temporal", "--task-queue", "allow", "--agent", "exec", "--agent-command", brought)
	if code := exit(run, out); code != 0 || !strings.Contains(out.String(), "completed (completed)") {
		t.Errorf("aot run of an allowed command exited %d:\n%s", code, out)
	}
	if data, err := os.ReadFile(marker); err != nil || string(data) != "ran\n" {
		t.Errorf("the allowed command did not run once: %q %v", data, err)
	}
}
