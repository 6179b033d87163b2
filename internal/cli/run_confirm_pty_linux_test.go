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

// With a terminal attached, an assertion the judge passed is put to the
// person before the loop completes: "y" completes it, "n" fails the check.
func TestRunAsksThePersonToConfirmAJudgedAssertion(t *testing.T) {
	for _, c := range []struct {
		answer   string
		wantExit int
		wantText string
	}{
		{"y\n", 0, "confirmed."},
		{"n\n", 5, "refused: the check fails."},
	} {
		t.Run(strings.TrimSpace(c.answer), func(t *testing.T) {
			dir := t.TempDir()
			obj := state.Objective{
				Goal: "g", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "the notes read well",
				BaseCase: &state.BaseCase{HasChecklist: true, Checklist: []state.ChecklistItem{
					{Item: "notes exist", Check: &state.Check{Type: state.CheckFile, Value: "notes.txt"}},
					{Item: "notes read well", Check: &state.Check{Type: state.CheckAssertion, Value: "notes.txt reads well"}},
				}},
			}
			s := state.New(obj, []state.Atom{{ID: "A1", Description: "write the notes", DependsOn: []string{}}}, "p")
			s.Objective.Constraints.MaxStallCount = 1
			stateFile := filepath.Join(dir, ".claude", "aot-loop-state.md")
			if err := state.NewStore(stateFile).Create(s, false); err != nil {
				t.Fatal(err)
			}
			agentScript := `case "$AOT_ROLE" in
worker) echo hi > notes.txt; echo '{"success": true, "summary": "wrote"}' ;;
judge) echo '{"passed": true, "evidence": "short and clear"}' ;;
*) echo '{"feasible": true, "atoms": [], "passed": true}' ;;
esac`
			if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte(agentScript), 0o644); err != nil {
				t.Fatal(err)
			}
			ptmx, tty := openPTY(t)
			defer ptmx.Close()
			cmd := exec.Command(os.Args[0], "run", "--agent-command", "sh agent.sh", "--state-file", stateFile, "--max-iterations", "3")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "AOT_TEST_AS_AOT=1", "NO_COLOR=1", "AOT_STATE_FILE=")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
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
			deadline := time.After(20 * time.Second)
			for !strings.Contains(screen.String(), "Does it hold? [y/N]") {
				select {
				case err := <-exited:
					t.Fatalf("aot run ended (%v) without asking:\n%s", err, screen.String())
				case <-deadline:
					_ = cmd.Process.Kill()
					t.Fatalf("no question within 20s:\n%s", screen.String())
				case <-time.After(10 * time.Millisecond):
				}
			}
			if !strings.Contains(screen.String(), `"notes read well"`) || !strings.Contains(screen.String(), "short and clear") {
				t.Fatalf("the question does not name the check and the judge's evidence:\n%s", screen.String())
			}
			ptmx.Write([]byte(c.answer))
			var err error
			select {
			case err = <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("aot run did not end:\n%s", screen.String())
			}
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			time.Sleep(100 * time.Millisecond)
			if code != c.wantExit || !strings.Contains(screen.String(), c.wantText) {
				t.Fatalf("exit %d (want %d), screen:\n%s", code, c.wantExit, screen.String())
			}
		})
	}
}
