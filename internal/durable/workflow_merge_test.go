package durable

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// attemptOn is the worker's attempt that pushes to branch.
func (w *world) attemptOn(branch string) AttemptInput {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, in := range w.attempts {
		if in.Branch == branch {
			return in
		}
	}
	return AttemptInput{}
}

// mergeBatch merges each atom as merge does, and records the batch.
func (w *world) mergeBatch(ctx context.Context, in MergeBatchInput) (MergeBatchResult, error) {
	var res MergeBatchResult
	var names []string
	for _, m := range in.Atoms {
		names = append(names, fmt.Sprintf("%s#%d", m.Atom, m.Attempt))
		r, err := w.merge(ctx, MergeInput{Repo: in.Repo, Base: in.Base, Branch: m.Branch, Atom: m.Atom, Loop: in.Loop, Attempt: m.Attempt, Message: m.Message})
		if err != nil {
			return MergeBatchResult{}, err
		}
		res.Atoms = append(res.Atoms, r)
		res.Commit = r.Commit
	}
	w.mu.Lock()
	w.batches = append(w.batches, names)
	w.mu.Unlock()
	return res, nil
}

func TestWorkflowMergesAttemptsThatFinishTogetherInOneActivity(t *testing.T) {
	w := newWorld()
	w.conflict = func(in MergeInput) bool { return in.Branch == "aot/loop-1/C-1" }
	r := newRun(t, w)
	// A's attempt ends first and its merge takes five minutes (on the
	// workflow's clock); B's, C's and D's end meanwhile, in this order, and
	// wait for it: then one activity merges the three.
	for id, d := range map[string]time.Duration{"A": 10 * time.Minute, "B": 11 * time.Minute, "C": 12 * time.Minute, "D": 13 * time.Minute} {
		r.env.OnActivity(AttemptActivity, mock.Anything, mock.MatchedBy(func(in AttemptInput) bool { return in.Task.Atom.ID == id })).
			After(d).Return(func(ctx context.Context, in AttemptInput) (AttemptResult, error) { return w.attempt(ctx, in) })
	}
	r.env.OnActivity(MergeBatchActivity, mock.Anything, mock.Anything).After(5 * time.Minute).Return(w.mergeBatch)
	out := r.execute(t, input(loopState(state.Constraints{MaxParallelAgents: 4}, []state.Atom{atom("A"), atom("B"), atom("C"), atom("D")}, nil)))
	wantReason(t, out, engine.Completed)
	if diff := cmp.Diff([][]string{{"A#1"}, {"B#1", "C#1", "D#1"}, {"C#2"}}, w.batches); diff != "" {
		t.Fatalf("merge activities (-want +got):\n%s", diff)
	}
	// C's conflict, in the middle of the batch, failed C's attempt alone:
	// A, B and D merged, and C's retry started on the batch's head.
	if diff := cmp.Diff([]string{"A", "B", "D", "C"}, w.merges); diff != "" {
		t.Errorf("merges (-want +got):\n%s", diff)
	}
	if c2 := w.attemptOn("aot/loop-1/C-2"); c2.BaseCommit != "head-3" || !strings.Contains(c2.Task.LastFailure, "conflict") {
		t.Errorf("C's second attempt: base %q, last failure %q", c2.BaseCommit, c2.Task.LastFailure)
	}
	s, _ := r.final(t)
	for _, a := range s.Atoms {
		if a.Status != state.StatusResolved {
			t.Errorf("%s is %s", a.ID, a.Status)
		}
	}
	if a := s.Atom("C"); a.Attempts != 1 {
		t.Errorf("C's failed attempts: %d, want 1 (the conflict)", a.Attempts)
	}
}

// max_parallel_agents counts agents: once A's work is pushed its slot is
// free, so B's agent starts while A's merge still runs, though only one
// agent may run at a time.
func TestWorkflowStartsTheNextAgentWhileAMergeWaits(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	var mu = &w.mu
	started := map[string]time.Time{}
	for id := range map[string]bool{"A": true, "B": true} {
		r.env.OnActivity(AttemptActivity, mock.Anything, mock.MatchedBy(func(in AttemptInput) bool { return in.Task.Atom.ID == id })).
			After(10 * time.Minute).Return(func(ctx context.Context, in AttemptInput) (AttemptResult, error) {
			mu.Lock()
			started[in.Task.Atom.ID] = r.env.Now()
			mu.Unlock()
			return w.attempt(ctx, in)
		})
	}
	r.env.OnActivity(MergeBatchActivity, mock.Anything, mock.Anything).After(30 * time.Minute).Return(w.mergeBatch)
	out := r.execute(t, input(loopState(state.Constraints{MaxParallelAgents: 1}, []state.Atom{atom("A"), atom("B")}, nil)))
	wantReason(t, out, engine.Completed)
	// The mock's clock: an attempt's function runs when its 10 minutes
	// are over. B's ended 10 minutes after A's, within A's 30-minute merge.
	if gap := started["B"].Sub(started["A"]); gap != 10*time.Minute {
		t.Errorf("B's agent ended %s after A's; want 10m (it started as A's merge began, not after it)", gap)
	}
	if diff := cmp.Diff([][]string{{"A#1"}, {"B#1"}}, w.batches); diff != "" {
		t.Errorf("merge activities (-want +got):\n%s", diff)
	}
}
