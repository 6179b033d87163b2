package durable

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// The workflow makes the local engine's decisions (engine.Core), so what a
// local run does with probes, the planner, broken work, judges, OR groups
// and scopes, a loop on Temporal does too.

func TestWorkflowProbesThenPlansAFailingAtom(t *testing.T) {
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Atom.ID == "A" {
			return failure("too big to do at once"), nil
		}
		return success(in), nil
	}
	w.other = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Role == agent.Planner {
			return AttemptResult{Result: agent.Result{Decompositions: []agent.PlannedDecomposition{{Parent: "A", Reason: "split it",
				Children: []agent.PlannedAtom{{ID: "A1", Description: "half"}, {ID: "A2", Description: "the other half", DependsOn: []string{"A1"}}}}}}}, nil
		}
		return AttemptResult{Result: agent.Result{Feasible: true, Findings: "it is two jobs"}}, nil
	}
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A"), atom("Z", "A")}, nil)))
	wantReason(t, out, engine.Completed)
	if diff := cmp.Diff([]string{"probe A", "planner A"}, w.roles()); diff != "" {
		t.Errorf("probes and planners (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"A#1", "A#2", "A1#1", "A2#1", "Z#1"}, w.tried()); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	// The worker's second attempt had the probe's findings.
	if lf := w.attempts[1].Task.LastFailure; !strings.Contains(lf, "probe findings: it is two jobs") {
		t.Errorf("A's second attempt was told: %q", lf)
	}
	s, _ := r.final(t)
	if a := s.Atom("A"); a.Status != state.StatusResolved || len(s.Decompositions) != 1 {
		t.Errorf("A: %+v, decompositions %+v", a, s.Decompositions)
	}
}

func TestWorkflowAsksThePlannerWhenTheBaseCaseFails(t *testing.T) {
	w := newWorld()
	w.passed = false
	planned := false
	w.other = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Role != agent.Planner || in.Task.Atom.ID != "base_case" {
			t.Errorf("unexpected %s on %s", in.Task.Role, in.Task.Atom.ID)
		}
		if !slices.ContainsFunc(in.Task.Failures, func(f string) bool { return strings.Contains(f, "go test failed") }) {
			t.Errorf("the planner was not told what fails: %q", in.Task.Failures)
		}
		if planned {
			return AttemptResult{}, nil
		}
		planned = true
		return AttemptResult{Result: agent.Result{Atoms: []agent.PlannedAtom{{ID: "FIX", Description: "fix the tests"}}}}, nil
	}
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Atom.ID == "FIX" {
			w.passed = true
		}
		return success(in), nil
	}
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{MaxStallCount: 3}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Completed)
	if diff := cmp.Diff([]string{"A#1", "FIX#1"}, w.tried()); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if w.judged == 0 {
		t.Error("the loop completed without a verification that judges")
	}
}

func TestWorkflowReopensWorkTheChecksFindBroken(t *testing.T) {
	w := newWorld()
	w.passed = false
	// A claims success but its file is missing until its second attempt.
	fixed := false
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Atom.ID == "A" && in.Task.Attempt > 1 {
			fixed = true
		}
		return success(in), nil
	}
	r := newRun(t, w)
	r.env.OnActivity(VerifyActivity, mock.Anything, mock.Anything).Return(func(ctx context.Context, in VerifyInput) (VerifyResult, error) {
		if fixed {
			return VerifyResult{Report: verify.Report{Passed: true, Checklist: []verify.ItemResult{{Item: "A.go exists", Passed: true}}}}, nil
		}
		return VerifyResult{Report: verify.Report{Checklist: []verify.ItemResult{{Item: "A.go exists", Evidence: "A.go: no such file"}}}}, nil
	})
	s := loopState(state.Constraints{MaxStallCount: 3}, []state.Atom{atom("A")}, func(s *state.State) {
		s.Objective.BaseCase = &state.BaseCase{Checklist: []state.ChecklistItem{{Item: "A.go exists", Check: &state.Check{Type: state.CheckFile, Value: "A.go"}}}}
	})
	out := r.execute(t, input(s))
	wantReason(t, out, engine.Completed)
	if diff := cmp.Diff([]string{"A#1", "A#2"}, w.tried()); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if lf := w.attempts[1].Task.LastFailure; !strings.Contains(lf, "A.go") {
		t.Errorf("the reopened attempt was not told what the check found: %q", lf)
	}
}

func TestWorkflowSerialisesOverlappingScopes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scopes [2]string
		took   time.Duration
	}{
		{"disjoint scopes run together", [2]string{"api/**", "web/**"}, 10 * time.Minute},
		{"overlapping scopes one after the other", [2]string{"src/**", "src/api/**"}, 20 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			r := newRun(t, w)
			slowAttempts(r, 10*time.Minute, success)
			start := r.env.Now()
			s := loopState(state.Constraints{MaxParallelAgents: 2}, []state.Atom{
				{ID: "A", Description: "a", Scope: []string{tc.scopes[0]}},
				{ID: "B", Description: "b", Scope: []string{tc.scopes[1]}},
			}, nil)
			wantReason(t, r.execute(t, input(s)), engine.Completed)
			if took := r.env.Now().Sub(start); took < tc.took || took >= tc.took+10*time.Minute {
				t.Errorf("took %s, want about %s", took, tc.took)
			}
		})
	}
}

func TestWorkflowSpeculativeORGroupKeepsTheFirstWinner(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	r.env.OnActivity(AttemptActivity, mock.Anything, mock.Anything).Return(func(ctx context.Context, in AttemptInput) (AttemptResult, error) {
		w.mu.Lock()
		w.attempts = append(w.attempts, in)
		w.mu.Unlock()
		if in.Task.Atom.ID == "X1" {
			// The selected choice is slow; X2 wins while it runs.
			select {
			case <-ctx.Done():
				return AttemptResult{}, ctx.Err()
			case <-time.After(5 * time.Second):
			}
		}
		return success(in), nil
	})
	s := loopState(state.Constraints{MaxParallelAgents: 2}, []state.Atom{
		{ID: "X1", Description: "the first way", ORGroup: "way"},
		{ID: "X2", Description: "the second way", ORGroup: "way"},
	}, func(s *state.State) {
		s.ORGroups = []state.ORGroup{{Name: "way", Choices: []string{"X1", "X2"}, Selected: "X1", Failed: []string{}, Speculative: true}}
	})
	wantReason(t, r.execute(t, input(s)), engine.Completed)
	final, _ := r.final(t)
	if g := final.ORGroup("way"); g.Selected != "X2" {
		t.Errorf("group: %+v", g)
	}
	if got := final.Atom("X2").Status; got != state.StatusResolved {
		t.Errorf("X2 is %s", got)
	}
	if len(w.merges) != 1 || w.merges[0] != "X2" {
		t.Errorf("merges %v", w.merges)
	}
}

// A rate limit is not the atom's fault: it is not charged, and the loop
// waits the provider's retry-after (up to two minutes) before the next attempt.
func TestWorkflowWaitsTheProvidersRetryAfter(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	var starts []time.Time
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		starts = append(starts, r.env.Now())
		if len(starts) == 1 {
			return AttemptResult{Kind: agent.KindRateLimit, Reason: "429 Too Many Requests", RetryAfter: 90 * time.Second, Unknown: true}, nil
		}
		return success(in), nil
	}
	wantReason(t, r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil))), engine.Completed)
	if len(starts) != 2 || starts[1].Sub(starts[0]) < 90*time.Second {
		t.Fatalf("attempts at %v, want the second 90 s after the first", starts)
	}
	s, _ := r.final(t)
	if a := s.Atom("A"); a.Attempts != 0 {
		t.Errorf("the rate limit was charged to A: %+v", a)
	}
}
