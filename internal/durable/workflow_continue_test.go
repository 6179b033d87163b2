package durable

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// runToEnd runs the loop through its continuations, each run in a new test
// environment (the test environment does not continue by itself), and
// returns the last run's outcome and the inputs of the continued runs.
func runToEnd(t *testing.T, w *world, in LoopInput) (Outcome, *run, []LoopInput) {
	t.Helper()
	var continued []LoopInput
	for runs := 0; runs < 1000; runs++ {
		r := newRun(t, w)
		// A busy machine (CI, two cores) may not run a workflow task on
		// 10,000 atoms within the default second.
		r.env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 20 * time.Second})
		r.env.ExecuteWorkflow(WorkflowName, in)
		if !r.env.IsWorkflowCompleted() {
			t.Fatalf("run %d did not complete", runs)
		}
		err := r.env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			var next LoopInput
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			continued = append(continued, next)
			in = next
			continue
		}
		if err != nil {
			t.Fatalf("run %d: %v", runs, err)
		}
		var out Outcome
		if err := r.env.GetWorkflowResult(&out); err != nil {
			t.Fatal(err)
		}
		return out, r, continued
	}
	t.Fatal("the loop never ended")
	return Outcome{}, nil, nil
}

func TestWorkflowContinuesAsNew(t *testing.T) {
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Atom.ID == "B" && in.Task.Attempt == 1 {
			return failure("not yet"), nil
		}
		return success(in), nil
	}
	in := input(loopState(state.Constraints{MaxParallelAgents: 1}, []state.Atom{atom("A"), atom("B", "A"), atom("C", "B"), atom("D", "C"), atom("E", "D")}, nil))
	in.ContinueAfter = 3
	out, r, continued := runToEnd(t, w, in)
	wantReason(t, out, engine.Completed)
	if len(continued) < 2 {
		t.Fatalf("%d continuations, want 2 or more", len(continued))
	}
	for i, next := range continued {
		c := next.Carry
		if c.Runs != i+1 || c.Core == nil || c.Core.Start.IsZero() || c.Head == "" || c.Core.Usage.InputTokens == 0 || c.Events == 0 {
			t.Errorf("carry %d: %+v", i, c)
		}
		s, err := state.Parse(next.State)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range s.Atoms {
			if a.Status == state.StatusInProgress {
				t.Errorf("run %d continued with %s in progress", i, a.ID)
			}
		}
	}
	// B's failure is remembered across runs; failures cost nothing here.
	s, st := r.final(t)
	if a := s.Atom("B"); a.Attempts != 1 || a.Status != state.StatusResolved {
		t.Errorf("B: %+v", a)
	}
	if st.Usage.InputTokens != 50 {
		t.Errorf("usage across runs: %+v", st.Usage)
	}
	if diff := fmt.Sprint(w.merges); diff != "[A B C D E]" {
		t.Errorf("merges %s", diff)
	}
}

// layered is a layered DAG: each atom depends on up to three atoms of the
// previous layer.
func layered(layers, width int) []state.Atom {
	atoms := make([]state.Atom, 0, layers*width)
	for l := range layers {
		for i := range width {
			a := atom(fmt.Sprintf("L%dN%d", l, i))
			if l > 0 {
				for k := range min(3, width) {
					a.DependsOn = append(a.DependsOn, fmt.Sprintf("L%dN%d", l-1, (i+k*7)%width))
				}
			}
			atoms = append(atoms, a)
		}
	}
	return atoms
}

func TestWorkflowTenThousandAtoms(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 atoms")
	}
	w := newWorld()
	in := input(loopState(state.Constraints{MaxParallelAgents: 8, MaxIterations: 100000}, layered(100, 100), nil))
	start := time.Now()
	out, r, continued := runToEnd(t, w, in)
	wantReason(t, out, engine.Completed)
	s, _ := r.final(t)
	if u := countUnresolved(s); u != 0 || len(w.merges) != 10000 {
		t.Errorf("%d unresolved, %d merges", u, len(w.merges))
	}
	t.Logf("10,000 atoms: %d workflow runs, %s", len(continued)+1, time.Since(start).Round(time.Millisecond))
}

func countUnresolved(s *state.State) int {
	n := 0
	for _, a := range s.Atoms {
		if a.Status != state.StatusResolved {
			n++
		}
	}
	return n
}

func TestWorkflowContinuesAsNewWhilePaused(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	slowAttempts(r, 10*time.Minute, success)
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(SignalPause, PauseRequest{Reason: "lunch"}) }, 5*time.Minute)
	in := input(loopState(state.Constraints{MaxWallTime: "1h"}, []state.Atom{atom("A"), atom("B", "A")}, nil))
	in.ContinueAfter = 2 // A's attempt and its merge
	r.env.ExecuteWorkflow(WorkflowName, in)
	var can *workflow.ContinueAsNewError
	if !errors.As(r.env.GetWorkflowError(), &can) {
		t.Fatalf("want a continuation, got %v", r.env.GetWorkflowError())
	}
	var next LoopInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if c := next.Carry; c.Core == nil || c.Core.Paused == nil || c.Core.Paused.Reason != "lunch" || c.Core.Paused.Since.IsZero() {
		t.Fatalf("carry: %+v", c)
	}
	// The next run starts paused: B waits for the resume, two hours later,
	// which max_wall_time does not charge.
	r2 := newRun(t, w)
	slowAttempts(r2, 10*time.Minute, success)
	r2.env.SetStartTime(r.env.Now())
	next.ContinueAfter = 0
	r2.env.RegisterDelayedCallback(func() { r2.env.SignalWorkflow(SignalResume, ResumeRequest{}) }, 2*time.Hour)
	wantReason(t, r2.execute(t, next), engine.Completed)
	if diff := fmt.Sprint(w.merges); diff != "[A B]" {
		t.Errorf("merges %s", diff)
	}
}

// A loop of 10,000 atoms, all resolved with their bindings, is the largest
// payload the loop makes (its Continue-As-New input and status answer):
// compressed, it stays under the 512 KiB at which Temporal starts warning
// (its limit is 2 MiB), where the plain JSON would not.
func TestTenThousandAtomsFitTemporalsPayloadLimits(t *testing.T) {
	ids := map[string]bool{}
	data := loopState(state.Constraints{}, layered(100, 100), func(s *state.State) {
		for i := range s.Atoms {
			a := &s.Atoms[i]
			a.Status = state.StatusResolved
			a.Attempts = 1
			s.Bindings = append(s.Bindings, state.Binding{AtomID: a.ID, Summary: "did " + a.ID + ": wrote the handler and its tests", Artifacts: []string{"internal/" + a.ID + "/handler.go", "internal/" + a.ID + "/handler_test.go"}})
			ids[a.ID] = true
		}
	})
	in := input(data)
	in.Carry = Carry{Core: &engine.Carry{Attempted: ids}, Runs: 3, Head: "0123456789abcdef0123456789abcdef01234567"}
	plain, err := converter.GetDefaultDataConverter().ToPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := DataConverter().ToPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	const warn = 512 << 10
	if len(plain.Data) <= warn || len(packed.Data) > warn {
		t.Errorf("10,000 atoms: %d bytes as JSON, %d compressed; want the compressed under %d", len(plain.Data), len(packed.Data), warn)
	}
	var back LoopInput
	if err := DataConverter().FromPayload(packed, &back); err != nil || !bytes.Equal(back.State, in.State) || len(back.Carry.Core.Attempted) != 10000 {
		t.Fatalf("the round trip lost the loop: %v", err)
	}
	t.Logf("10,000 resolved atoms: %d KiB as JSON, %d KiB compressed", len(plain.Data)>>10, len(packed.Data)>>10)
}
