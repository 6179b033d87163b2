package durable

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/workspace"
)

// mergeBatchMax bounds the atoms one MergeBatch activity merges (its input
// carries their summaries).
const mergeBatchMax = 64

// batched reports whether this workflow merges in batches: those started
// before the "merge-batch" version merge one branch at a time, and replay
// so.
func (l *loop) batched() bool {
	return workflow.GetVersion(l.ctx, "merge-batch", workflow.DefaultVersion, 1) >= 1
}

// startBatch merges the attempts waiting for their merge, in the order
// their agents finished, in one MergeBatch activity; a cancelled one is
// dropped.
//
// Commits a worker holds (held.go) are merged on that worker, in batches
// of its own: the batch takes the first waiting merge's worker (or the
// shared queue) and the waiting merges of the same; the others wait for
// the next batch.
func (l *loop) startBatch() {
	in := MergeBatchInput{Repo: l.in.Repo, Base: l.in.Base, Loop: l.id, Project: l.in.Project, StateFile: l.in.StateFile, Head: l.head}
	var rest []int
	queue := ""
	for _, id := range l.merges {
		t := l.tasks[id]
		if t != nil && t.res != nil && l.gone[t.res.HeldOn] {
			t.lostHolder, t.res.HeldOn = t.res.HeldOn, ""
		}
		switch {
		case t == nil:
		case t.discarded:
			l.done(t, engine.Finished{Err: &agent.AttemptError{Kind: agent.KindCancelled, Reason: "cancelled before its merge"}})
		case len(l.batch) == mergeBatchMax, len(l.batch) > 0 && t.res.HeldOn != queue:
			rest = append(rest, id)
		default:
			queue = t.res.HeldOn
			l.batch = append(l.batch, t)
			in.Atoms = append(in.Atoms, MergeAtom{Branch: t.branch, Atom: t.Atom, Attempt: t.N, Message: t.res.Result.Summary,
				Commit: t.res.Commit, Base: t.res.Base, Files: t.res.RepoFiles, Held: queue != ""})
		}
	}
	l.merges = rest
	if len(l.batch) > 0 {
		// merge/A/1, or merge/A/1+3 for A's and three more atoms'.
		first := l.batch[0]
		id := fmt.Sprintf("merge/%s/%d", first.Atom, first.N)
		if more := len(l.batch) - 1; more > 0 {
			id += fmt.Sprintf("+%d", more)
		}
		o := mergeOptions()
		if queue != "" {
			// Its worker's own queue, which a worker that died or stopped
			// no longer polls: past holderWait, batchEnded merges the
			// batch from the branches a stopping worker pushes.
			o.TaskQueue, o.ScheduleToStartTimeout = queue, holderWait
		}
		l.mergeF = workflow.ExecuteActivity(workflow.WithActivityOptions(l.ctx, named(o, l.activityID(id))), MergeBatchActivity, in)
	}
}

// holds reports whether this workflow lets workers hold their attempts'
// commits for a merge on the same worker (held.go); those started before
// the "merge-on-holder" version have every commit pushed, and replay so.
func (l *loop) holds() bool {
	// Its own version first: a history without its marker never asks for
	// "merge-batch" earlier than it did.
	return workflow.GetVersion(l.ctx, "merge-on-holder", workflow.DefaultVersion, 1) >= 1 && l.batched()
}

// holderLost takes back a batch of held commits that its worker's queue
// did not take in time: the batch waits again, first, to be merged on the
// shared queue from the atoms' branches (a stopping worker pushes what it
// holds; an atom whose branch is not there runs again).
func (l *loop) holderLost(batch []*attempt) {
	// Its later batches go to the shared queue at once.
	if l.gone == nil {
		l.gone = map[string]bool{}
	}
	l.gone[batch[0].res.HeldOn] = true
	ids := make([]int, 0, len(batch)+len(l.merges))
	for _, t := range batch {
		t.lostHolder, t.res.HeldOn = t.res.HeldOn, ""
		ids = append(ids, t.ID)
	}
	l.merges = append(ids, l.merges...)
}

// batchEnded takes a MergeBatch's result: the new head, and each
// attempt's end for the Core, in the batch's order (a conflict fails that
// attempt alone; it is re-run on the new head).
func (l *loop) batchEnded() {
	batch := l.batch
	var m MergeBatchResult
	err := l.mergeF.Get(l.ctx, &m)
	l.batch, l.mergeF = nil, nil
	l.finished++
	if err != nil && holderGone(err) && len(batch) > 0 && batch[0].res.HeldOn != "" {
		l.holderLost(batch)
		return
	}
	if err == nil && m.Commit != "" {
		l.head = m.Commit
	}
	for i, t := range batch {
		var r MergeResult
		switch {
		case err != nil:
			r.Error = err.Error()
		case i < len(m.Atoms):
			r = m.Atoms[i]
		default:
			r.Error = "the merge gave no result for this atom"
		}
		if r.Error != "" {
			reason := "merge: " + dag.OneLine(r.Error, 400)
			if t.lostHolder != "" {
				reason = fmt.Sprintf("the worker that held its commit (task queue %s) went away before merging it, and did not push it: %s", t.lostHolder, reason)
			}
			l.done(t, engine.Finished{Err: &agent.AttemptError{Kind: agent.KindCrash, Reason: reason, Usage: t.res.Result.Usage}})
			continue
		}
		l.done(t, engine.Finished{Result: t.res.Result, Merge: &workspace.Merge{Commit: r.Commit, Conflict: r.Conflict, ConflictFiles: r.Files,
			Changed: t.res.Files, Unclaimed: t.res.Unclaimed, Missing: t.res.Missing}})
	}
}

// freeSlotAtPush reports whether this workflow frees an attempt's agent
// slot once its work is pushed, before its merge (an agent of another atom
// starts meanwhile, and the successes waiting for a merge grow into
// batches); workflows started before keep the slot until the merge.
func (l *loop) freeSlotAtPush() bool {
	return workflow.GetVersion(l.ctx, "free-slot-at-push", workflow.DefaultVersion, 1) >= 1
}
