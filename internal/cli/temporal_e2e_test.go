//go:build temporal && unix

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/temporaltest"
)

// The README's recipe, as a person runs it: a Temporal dev server, two
// `aot worker` processes, `aot run --engine temporal` in a project whose
// remote the workers reach; Ctrl-C detaches, a second `aot run` reattaches
// and sees the loop to its end. Every process is the aot command itself.
func TestTemporalRecipeWithTwoWorkerProcesses(t *testing.T) {
	addr := temporaltest.DevServer(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	aot := filepath.Join(bin, "aot") // the test binary acts as aot under this name (TestMain)
	if err := os.Symlink(self, aot); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, "cache"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, "gitconfig"),
		"TEMPORAL_ADDRESS="+addr, "TEMPORAL_NAMESPACE=default", "NO_COLOR=1", envStateFile+"=")

	var atoms []state.Atom
	for _, id := range []string{"A", "B", "C", "D"} {
		atoms = append(atoms, state.Atom{ID: id, Description: "write " + id + ".txt"})
	}
	atoms = append(atoms, state.Atom{ID: "E", Description: "sum up", DependsOn: []string{"A", "B", "C", "D"}})
	root, remote, ws, sf := temporalProject(t, "five files", "test -f A.txt && test -f B.txt && test -f C.txt && test -f D.txt && test -f E.txt", 4, atoms...)

	// Each agent notes where it ran (its worktree is in its worker's
	// cache), and holds until the gate exists (at most a minute).
	ran := filepath.Join(root, "ran.log")
	gate := filepath.Join(root, "gate")
	agent := `echo "$AOT_ATOM_ID $PWD" >> ` + ran + `; i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; ` +
		`echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "wrote '"$AOT_ATOM_ID"'"}'`

	start := func(name string, args ...string) (*exec.Cmd, *lockedBuffer) {
		t.Helper()
		out := &lockedBuffer{}
		cmd := exec.Command(aot, args...)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = ws, env, out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Signal(os.Interrupt)
				done := make(chan struct{})
				go func() { cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					cmd.Process.Kill()
					t.Errorf("%s did not stop within 20s of Ctrl-C:\n%s", name, out)
				}
			}
		})
		return cmd, out
	}
	const queue = "recipe"
	for _, w := range []string{"w1", "w2"} {
		_, out := start(w, "worker", "--task-queue", queue, "--cache", filepath.Join(root, "cache-"+w), "--identity", w, "--grace", "1s", "--max-activities", "2")
		until(t, w+" polls", 60*time.Second, func() bool { return strings.Contains(out.String(), "polling task queue "+queue) })
	}

	// aot run attaches; once four agents run, Ctrl-C detaches.
	run1, out1 := start("aot run", "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec", "--agent-command", agent)
	until(t, "four agents run", 90*time.Second, func() bool {
		data, _ := os.ReadFile(ran)
		return strings.Count(string(data), "\n") >= 4
	})
	run1.Process.Signal(syscall.SIGINT)
	if err := run1.Wait(); err != nil {
		t.Fatalf("aot run after Ctrl-C: %v\n%s", err, out1)
	}
	if !strings.Contains(out1.String(), "detached: the loop goes on as workflow") {
		t.Errorf("aot run did not say it detached:\n%s", out1)
	}

	// The loop goes on; a second aot run reattaches and ends with it.
	run2, out2 := start("aot run again", "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec", "--agent-command", agent)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- run2.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("the reattached aot run: %v\n%s", err, out2)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the loop did not end within 3 minutes:\n%s", out2)
	}
	for _, want := range []string{"completed (completed)", "atom_finish  E  worker  attempt 1  ok", "verify  ", "stop  "} {
		if !strings.Contains(out2.String(), want) {
			t.Errorf("the reattached aot run did not show %q:\n%s", want, out2)
		}
	}

	// Atoms ran on both workers.
	data, _ := os.ReadFile(ran)
	on := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		for _, w := range []string{"w1", "w2"} {
			if strings.Contains(line, "cache-"+w) {
				on[w] = true
			}
		}
	}
	if !on["w1"] || !on["w2"] {
		t.Errorf("the atoms did not land on both workers:\n%s", data)
	}
	// The local state and journal say what the workflow did.
	final, err := state.NewStore(sf).Read()
	if err != nil || final.Control.Status != state.ControlCompleted {
		t.Fatalf("local state: %v %+v\nfirst run:\n%s\nsecond run:\n%s", err, final.Control, out1, out2)
	}
	evs, err := journal.Read(journal.PathFor(sf))
	if err != nil {
		t.Fatal(err)
	}
	finished := map[string]int{}
	for _, ev := range evs {
		if ev.Type == journal.AtomFinish && ev.Role == "worker" && ev.OK != nil && *ev.OK {
			finished[ev.Atom]++
		}
		if ev.Type == journal.RunStart || ev.Type == journal.Stop {
			finished[ev.Type]++
		}
	}
	for _, id := range []string{"A", "B", "C", "D", "E", journal.RunStart, journal.Stop} {
		if finished[id] != 1 {
			t.Errorf("the local journal has %s %d times", id, finished[id])
		}
	}
	// Every atom is merged once into the integration branch on the remote.
	_, rest, ok := strings.Cut(out1.String(), "detached: the loop goes on as workflow ")
	id, _, _ := strings.Cut(rest, ";")
	if !ok || id == "" {
		t.Fatalf("no workflow id in:\n%s", out1)
	}
	subjects := gitIn(t, remote, "log", "--format=%s", "aot/"+id+"/integration")
	for _, id := range []string{"A", "B", "C", "D", "E"} {
		if n := strings.Count(subjects+"\n", "aot: merge atom "+id+"\n"); n != 1 {
			t.Errorf("atom %s merged %d times:\n%s", id, n, subjects)
		}
	}
	// aot status reads it (through the workflow) like a local loop.
	st := exec.Command(aot, "status")
	st.Dir, st.Env = ws, env
	if out, err := st.CombinedOutput(); err != nil || !strings.Contains(string(out), "completed") {
		t.Errorf("aot status: %v\n%s", err, out)
	}
}
