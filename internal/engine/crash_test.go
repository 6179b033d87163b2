//go:build unix

package engine

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
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
	_, _ = Run(context.Background(), Options{StateFile: path, Agent: slowish{}, FlushInterval: 20 * time.Millisecond})
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
		select {
		case <-done:
		case <-time.After(time.Duration(30+r.IntN(120)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
		}
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
