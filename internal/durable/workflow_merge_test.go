package durable

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

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

// heldBatch is one MergeBatch as the worker saw it: its task queue and
// its atoms, as atom#attempt, each marked held or not.
type heldBatch struct {
	Queue string
	Atoms []string
}

func (w *world) recordHeld(ctx context.Context, in MergeBatchInput, into *[]heldBatch) {
	b := heldBatch{Queue: activity.GetInfo(ctx).TaskQueue}
	for _, m := range in.Atoms {
		b.Atoms = append(b.Atoms, fmt.Sprintf("%s#%d held=%v", m.Atom, m.Attempt, m.Held))
	}
	w.mu.Lock()
	*into = append(*into, b)
	w.mu.Unlock()
}

// A worker's attempt may keep its commit (it asks every one to); the
// workflow merges the commits one worker holds on that worker's own
// queue, in batches of that worker's alone, and pushed ones on the shared
// queue as before.
func TestWorkflowMergesHeldCommitsOnTheWorkerThatHoldsThem(t *testing.T) {
	w := newWorld()
	heldBy := map[string]string{"A": "q@w1", "B": "q@w1", "C": "q@w2", "D": ""}
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		r := success(in)
		if in.Hold {
			r.HeldOn = heldBy[in.Task.Atom.ID]
		}
		return r, nil
	}
	r := newRun(t, w)
	for id, d := range map[string]time.Duration{"A": 10 * time.Minute, "B": 11 * time.Minute, "C": 12 * time.Minute, "D": 13 * time.Minute} {
		r.env.OnActivity(AttemptActivity, mock.Anything, mock.MatchedBy(func(in AttemptInput) bool { return in.Task.Atom.ID == id })).
			After(d).Return(func(ctx context.Context, in AttemptInput) (AttemptResult, error) { return w.attempt(ctx, in) })
	}
	var batches []heldBatch
	r.env.OnActivity(MergeBatchActivity, mock.Anything, mock.Anything).After(5 * time.Minute).Return(func(ctx context.Context, in MergeBatchInput) (MergeBatchResult, error) {
		w.recordHeld(ctx, in, &batches)
		return w.mergeBatch(ctx, in)
	})
	out := r.execute(t, input(loopState(state.Constraints{MaxParallelAgents: 4}, []state.Atom{atom("A"), atom("B"), atom("C"), atom("D")}, nil)))
	wantReason(t, out, engine.Completed)
	for _, in := range w.attempts {
		if !in.Hold {
			t.Errorf("attempt %s was not allowed to hold its commit", in.Branch)
		}
	}
	// A alone (it ended first); then B (w1's) while C (w2's) and D
	// (pushed) wait; then C; then D.
	want := []heldBatch{
		{"q@w1", []string{"A#1 held=true"}},
		{"q@w1", []string{"B#1 held=true"}},
		{"q@w2", []string{"C#1 held=true"}},
		{DefaultTaskQueue, []string{"D#1 held=false"}},
	}
	if diff := cmp.Diff(want, batches); diff != "" {
		t.Fatalf("merge batches (-want +got):\n%s", diff)
	}
	s, _ := r.final(t)
	for _, a := range s.Atoms {
		if a.Status != state.StatusResolved || a.Attempts != 0 {
			t.Errorf("%s is %s after %d failed attempts", a.ID, a.Status, a.Attempts)
		}
	}
}

// A batch its holder's queue does not take in time (the worker died or
// stopped) is merged on the shared queue from the atoms' branches: an
// atom whose branch a stopping worker pushed lands; one whose worker was
// killed (no branch) runs again, and its failure says why.
func TestWorkflowMergesFromTheBranchesWhenTheHolderIsGone(t *testing.T) {
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		r := success(in)
		if in.Task.Attempt == 1 {
			r.HeldOn = "q@gone"
		}
		return r, nil
	}
	r := newRun(t, w)
	// A's first attempt ends first, B's a minute later.
	for id, d := range map[string]time.Duration{"A": time.Minute, "B": 2 * time.Minute} {
		r.env.OnActivity(AttemptActivity, mock.Anything, mock.MatchedBy(func(in AttemptInput) bool { return in.Task.Atom.ID == id })).
			After(d).Return(func(ctx context.Context, in AttemptInput) (AttemptResult, error) { return w.attempt(ctx, in) })
	}
	var batches []heldBatch
	r.env.OnActivity(MergeBatchActivity, mock.Anything, mock.Anything).Return(func(ctx context.Context, in MergeBatchInput) (MergeBatchResult, error) {
		w.recordHeld(ctx, in, &batches)
		if activity.GetInfo(ctx).TaskQueue == "q@gone" {
			return MergeBatchResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		}
		res, err := w.mergeBatch(ctx, in)
		for i, m := range in.Atoms {
			if m.Branch == "aot/loop-1/B-1" { // its worker was killed: never pushed
				res.Atoms[i] = MergeResult{Error: in.Repo + " has no branch " + m.Branch}
			}
		}
		return res, err
	})
	out := r.execute(t, input(loopState(state.Constraints{MaxParallelAgents: 2}, []state.Atom{atom("A"), atom("B")}, nil)))
	wantReason(t, out, engine.Completed)
	// Once A's holder is known gone, B's batch (the same holder's) goes
	// to the shared queue at once.
	want := []heldBatch{
		{"q@gone", []string{"A#1 held=true"}},
		{DefaultTaskQueue, []string{"A#1 held=false"}},
		{DefaultTaskQueue, []string{"B#1 held=false"}},
		{DefaultTaskQueue, []string{"B#2 held=false"}},
	}
	if diff := cmp.Diff(want, batches); diff != "" {
		t.Fatalf("merge batches (-want +got):\n%s", diff)
	}
	s, _ := r.final(t)
	if a := s.Atom("A"); a.Status != state.StatusResolved || a.Attempts != 0 {
		t.Errorf("A: %s after %d failed attempts, want resolved from its pushed branch", a.Status, a.Attempts)
	}
	if b := s.Atom("B"); b.Status != state.StatusResolved || b.Attempts != 1 {
		t.Errorf("B: %s after %d failed attempts, want resolved on its second", b.Status, b.Attempts)
	}
	if b2 := w.attemptOn("aot/loop-1/B-2"); !strings.Contains(b2.Task.LastFailure, "q@gone") {
		t.Errorf("B's second attempt was told %q, want its first's holder named", b2.Task.LastFailure)
	}
}
