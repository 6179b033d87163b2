//go:build unix

package local

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

const crashEnv = "AOT_ENGINE_CRASH_HELPER"

// slowish resolves every atom after a few milliseconds.
type slowish struct{}

func (slowish) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	select {
	case <-time.After(2 * time.Millisecond):
	case <-ctx.Done():
	}
	return agent.Result{Success: true, Summary: "did " + t.Atom.ID, Artifacts: []string{t.Atom.ID + ".go"}}, nil
}

// TestEngineHelperProcess is the engine run as a child, to be killed.
func TestEngineHelperProcess(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("runs only as the child of TestKillNineAnywhereResumes")
	}
	var a agent.Agent = slowish{}
	if c := os.Getenv(crashEnv + "_AGENT"); c != "" {
		a = &agent.Exec{Command: c}
	}
	_, _ = Run(context.Background(), Options{Settings: engine.Settings{Isolation: os.Getenv(crashEnv + "_ISOLATION")}, StateFile: path, Agent: a, FlushInterval: 20 * time.Millisecond})
	os.Exit(0)
}

// TestKillNineAnywhereResumes kills the engine with SIGKILL at random moments,
// again and again, and resumes it each time: the loop completes, the state
// file is always valid, and no atom that the journal shows finished is ever
// started again.
func TestKillNineAnywhereResumes(t *testing.T) {
	dir := t.TempDir()
	obj := state.Objective{Goal: "g", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c",
		BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "true"}}}
	s := state.New(obj, layered(600, 8, 9), "p")
	s.Objective.Constraints.MaxIterations = 10_000
	s.Objective.Constraints.MaxParallelAgents = 4
	path := filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := state.NewStore(path).Create(s, false); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	kills := 0
	for round := 0; round < 300; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestEngineHelperProcess$")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Kill at a point the engine has reached, never after a wall-clock
		// delay: once it has written n more journal lines (its start, agent
		// starts and finishes, checkpoints), so a slow machine is killed as
		// far into the run as a fast one.
		base := journalLines(path)
		n := 1 + r.IntN(60)
		tick := time.NewTicker(time.Millisecond)
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-tick.C:
				if journalLines(path) >= base+n {
					_ = cmd.Process.Signal(syscall.SIGKILL)
					<-done
					kills++
					break wait
				}
			}
		}
		tick.Stop()
		got, err := state.NewStore(path).Read()
		if err != nil {
			t.Fatalf("round %d: the state file does not read after a kill: %v", round, err)
		}
		if rep := state.Validate(got); !rep.Valid() {
			t.Fatalf("round %d: invalid state after a kill: %v", round, rep.Errors)
		}
		if got.Control.Status == state.ControlCompleted {
			break
		}
	}
	got, err := state.NewStore(path).Read()
	if err != nil {
		t.Fatal(err)
	}
	if got.Control.Status != state.ControlCompleted {
		t.Fatalf("not completed after %d kills: %+v", kills, got.Control)
	}
	for _, a := range got.Atoms {
		if a.Status != state.StatusResolved || got.Binding(a.ID) == nil {
			t.Fatalf("%s: %s, binding %v", a.ID, a.Status, got.Binding(a.ID))
		}
	}
	events, err := journal.Read(journal.PathFor(path))
	if err != nil {
		t.Fatal(err)
	}
	finished := map[string]bool{}
	for _, ev := range events {
		switch {
		case ev.Type == journal.AtomStart && finished[ev.Atom]:
			t.Fatalf("%s was started again after the journal showed it finished", ev.Atom)
		case ev.Type == journal.AtomFinish && ev.Role == string(agent.Worker) && ev.OK != nil && *ev.OK:
			finished[ev.Atom] = true
		}
	}
	if kills < 3 {
		t.Fatalf("the engine was killed only %d times: the test proves little", kills)
	}
	t.Logf("completed after %d kills", kills)
}

// journalLines counts the journal's complete lines.
func journalLines(stateFile string) int {
	data, err := os.ReadFile(journal.PathFor(stateFile))
	if err != nil {
		return 0
	}
	return bytes.Count(data, []byte("\n"))
}

// TestAResumedEngineKillsTheAgentsOfTheCrashedOne: kill -9 of the engine
// must not leave its agents (and their background children) running beside
// the next engine's.
func TestAResumedEngineKillsTheAgentsOfTheCrashedOne(t *testing.T) {
	for _, tc := range []struct{ name, stray string }{
		{"the journal as the crash left it", ""},
		// A stray line with a checkpoint's bytes (a hand edit, another
		// program's write) is not the last checkpoint: the trees journaled
		// before it are still found and killed.
		{"a stray checkpoint-like line after the crash", `garbage {"type":"checkpoint","data":{"processes":[]}}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) { resumeAfterCrashWithAgents(t, tc.stray) })
	}
}

func resumeAfterCrashWithAgents(t *testing.T, stray string) {
	path, dir, _ := scriptProject(t, []string{"A", "B", "C"}, "test -f A.ok && test -f B.ok && test -f C.ok", nil)
	// Each agent leaves a background child (as agents start dev servers),
	// records both pids, and hangs.
	script := filepath.Join(dir, "hang.sh")
	if err := os.WriteFile(script, []byte(`sleep 1000 & echo $! >> pids; echo $$ >> pids; sleep 1000`), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEngineHelperProcess$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path, crashEnv+"_AGENT=sh "+script)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for countEvents(path, journal.Process) < 3 || len(pidsIn(t, dir)) < 6 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the agents did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if stray != "" {
		f, err := os.OpenFile(journal.PathFor(path), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString(stray)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	pids := pidsIn(t, dir)
	t.Cleanup(func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	// The resumed engine: its agent first checks that nothing of the old
	// engine's runs anymore.
	check := filepath.Join(dir, "check.sh")
	if err := os.WriteFile(check, []byte(`for p in $(cat pids); do if kill -0 $p 2>/dev/null && ! grep -q zombie /proc/$p/status 2>/dev/null && [ "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" != Z ]; then echo "alive $p" >> survivors; fi; done
touch "$AOT_ATOM_ID.ok"; echo '{"success": true}'`), 0o755); err != nil {
		t.Fatal(err)
	}
	out := runEngine(t, path, &agent.Exec{Command: "sh " + check}, nil)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "survivors")); err == nil {
		t.Fatalf("the old engine's agents still ran beside the new one:\n%s", data)
	}
	for _, p := range pids {
		if processAlive(p) {
			t.Fatalf("process %d of the crashed engine is still alive", p)
		}
	}
}

func pidsIn(t *testing.T, dir string) []int {
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(dir, "pids"))
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// processAlive reports whether pid runs (a zombie is not alive).
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill -0
	}
	if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
		return data[i+2] != 'Z'
	}
	return true
}

func countEvents(path, typ string) int {
	all, _ := journal.Read(journal.PathFor(path))
	n := 0
	for _, e := range all {
		if e.Type == typ {
			n++
		}
	}
	return n
}
