package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/workspace"
)

// integrate records one finished agent run. It reports whether the run was
// a worker's (an iteration's worth of work) rather than a probe or planner.
func (e *engine) integrate(ctx context.Context, r taskResult) bool {
	t := e.tasks[r.id]
	if t == nil {
		return false
	}
	delete(e.tasks, r.id)
	if e.busy[t.atom] == t.id {
		delete(e.busy, t.atom)
	}
	defer func() {
		// Whatever happened, an atom that can run again is a candidate.
		if _, running := e.busy[t.atom]; !running && !e.reshape && e.ix.Ready(t.atom) {
			e.markReady(t.atom)
		}
	}()
	e.addUsage(r.res.Usage, r.err)
	// Refused tool calls are journaled whatever becomes of the attempt.
	denials := e.journalRefusals(t, r)
	if t.discarded {
		return false
	}
	a := e.ix.Atom(t.atom)
	if a == nil {
		return false
	}
	if r.err == nil && r.res.UsageLimit {
		// Not the atom's fault: it goes back untouched, and the loop waits
		// for the quota to reset or stops.
		if a.Status == state.StatusInProgress {
			a.Status = state.StatusPending
			e.dirty = true
		}
		e.event(journal.Event{Type: journal.AtomReset, Atom: t.atom, Role: string(t.role), Attempt: t.attempt, Reason: "usage limit: " + dag.OneLine(r.res.Summary+r.res.Evidence+r.res.Findings, 200)})
		e.usageLimit(t.atom, r.res)
		return false
	}
	if ae, transient := agent.Transient(r.err); transient {
		// A rate limit or an overloaded provider: not the atom's fault
		// either; it goes back untouched and the loop waits a little, with
		// fewer agents at once.
		if a.Status == state.StatusInProgress {
			a.Status = state.StatusPending
			e.dirty = true
		}
		e.rateLimited(t, ae)
		return false
	}
	e.rateCleared()
	if r.err == nil {
		if cut := agent.Fit(&r.res); len(cut) > 0 {
			e.say("%s %s: %s (its whole answer: aot logs %s)", t.role, t.atom, strings.Join(cut, "; "), t.atom)
		}
		if berr := agent.CheckBounds(r.res); berr != nil {
			r.err = &agent.AttemptError{Reason: berr.Error(), Usage: r.res.Usage}
			r.res = agent.Result{}
		}
	}
	claimed := r.res.Artifacts
	conflict := false
	if r.err == nil && t.role == agent.Worker {
		if c := e.mergeOutcome(t, &r); c != "" {
			r.err = &agent.AttemptError{Reason: c, Usage: r.res.Usage}
			conflict = true
		}
	}
	e.checkWork(t, &r, claimed, denials)
	ok := r.err == nil && r.res.OK(t.role)
	if t.role == agent.Planner {
		ok = r.err == nil // a plan that proposes nothing did not fail
	}
	reason := failureReason(t.role, r)
	ev := journal.Event{Type: journal.AtomFinish, Atom: t.atom, Role: string(t.role), Attempt: t.attempt, OK: journal.Bool(ok),
		DurationMS: r.dur.Milliseconds()}
	d := UsageFields(&ev, r.res, r.err)
	if !ok {
		ev.Reason = reason
		d.Kind = failureKind(r)
		ev = ev.With(d)
	}
	switch t.role {
	case agent.Probe:
		e.event(ev)
		e.book.Next[t.atom] = agent.Worker
		if r.err == nil && !r.res.Feasible {
			e.book.Next[t.atom] = agent.Planner
		}
		e.book.Notes[t.atom] = dag.OneLine(r.res.Findings, 2000)
		e.say("probe %s: feasible=%t %s", t.atom, r.err == nil && r.res.Feasible, dag.OneLine(r.res.Findings, 60))
		return false
	case agent.Planner:
		if ok {
			ev = ev.With(journal.AtomFinishData{Proposed: len(r.res.Atoms) + len(r.res.Decompositions)})
		}
		e.event(ev)
		e.book.Planned[t.atom] = true
		e.book.Next[t.atom] = agent.Worker
		if r.err == nil {
			e.applyPlan(t.atom, r.res)
		}
		return false
	}
	e.attemptDone(t.atom)
	if ok {
		e.claim(a.ID, claimsIn(e.readDirFor(&r), claimed))
		e.resolve(ctx, a, r.res, ev)
		return true
	}
	e.event(ev)
	// A crash, a timeout or garbage says nothing about the atom itself: it
	// is retried as it is; the probe and the planner are for an agent that
	// tried and reported failure.
	// A worker that tried and failed on an atom whose dependencies are done
	// may have failed because one of them no longer holds (a later atom
	// broke it): their checks are run first, and a broken dependency is
	// reopened instead of retrying this atom against it.
	depBroken := r.err == nil && !conflict && t.role == agent.Worker && e.brokenDependencies(ctx, a) > 0
	// A worker that said it succeeded and changed nothing tried and failed,
	// as one that reported failure did: probed, planned, counted as a stall.
	lied := failureKind(r) == string(agent.KindNoChange)
	e.infra = (r.err != nil && !conflict && !lied) || depBroken
	e.fail(a, reason)
	e.infra = false
	if conflict && !e.parked(a) {
		e.book.Next[a.ID] = agent.Worker // re-run on the merged work, no probe or planner
	}
	return true
}

// failureKind classifies a failed attempt for the journal and aot status:
// the backend's kind, or what the agent itself said.
func failureKind(r taskResult) string {
	var ae *agent.AttemptError
	switch {
	case errors.As(r.err, &ae) && ae.Kind != "":
		return string(ae.Kind)
	case r.err != nil:
		return string(agent.KindCrash)
	}
	return "reported_failure"
}

func failureReason(role agent.Role, r taskResult) string {
	if r.err != nil {
		return r.err.Error()
	}
	switch role {
	case agent.Worker:
		if s := strings.TrimSpace(r.res.Summary); s != "" {
			return "the worker reported failure: " + s
		}
		return "the worker reported failure"
	case agent.Probe:
		return "the probe found the atom not feasible: " + r.res.Findings
	}
	return "the " + string(role) + " did not succeed"
}

// resolve records a worker's success: the atom is resolved with its binding,
// parents whose children are done resolve, and a speculative group adopts
// the winner and kills the other choices.
func (e *engine) resolve(ctx context.Context, a *state.Atom, res agent.Result, ev journal.Event) {
	summary := strings.TrimSpace(res.Summary)
	if summary == "" {
		summary = "resolved by the worker"
	}
	arts := append([]string{}, res.Artifacts...)
	e.event(ev.With(journal.AtomFinishData{Summary: summary, Artifacts: arts}))
	a.Status = state.StatusResolved // in_progress -> resolved: a worker finished it
	e.bind(state.Binding{AtomID: a.ID, Summary: summary, Artifacts: arts})
	if e.unresolved > 0 && e.ix.Live(a.ID) {
		e.unresolved--
	}
	for _, id := range e.ix.Affected(a.ID) {
		if e.ix.Ready(id) {
			e.markReady(id)
		}
	}
	a.LastFailure = ""
	delete(e.book.Next, a.ID)
	delete(e.book.Waiting, a.ID)
	e.dirty = true
	e.book.Gen++
	// Progress: the stall window starts again at once, so that a stop that
	// is draining goes on instead.
	e.s.Control.StallCount = 0
	e.say("worker %s resolved in %s: %s", a.ID, time.Duration(ev.DurationMS)*time.Millisecond, dag.OneLine(summary, 60))
	if g := e.s.ORGroup(a.ORGroup); g != nil && a.ORGroup != "" {
		if g.Selected != a.ID {
			_ = dag.SwitchOR(e.s, g.Name, a.ID, "speculative: "+a.ID+" succeeded first", e.now())
			e.event(journal.Event{Atom: a.ID, Reason: "speculative winner"}.With(journal.ORSwitchData{ORGroup: g.Name}))
			e.structural()
		}
		for _, c := range g.Choices {
			if c == a.ID {
				continue
			}
			if id, running := e.busy[c]; running {
				e.kill(id, "speculative: "+a.ID+" won")
			}
		}
	}
	if len(e.s.Decompositions) == 0 || !e.ix.IsChild(a.ID) {
		return
	}
	for _, p := range dag.ResolveParents(e.s) {
		e.structural()
		e.event(journal.Event{Atom: p}.With(journal.ParentDoneData{Summary: e.s.Binding(p).Summary, Artifacts: e.s.Binding(p).Artifacts}))
		e.say("parent %s resolved: all its children are", p)
	}
}

// fail records a failed attempt and picks the next strategy: an OR choice
// backtracks to the next choice; a plain atom is probed first, then handed
// to the planner to decompose, then retried, within the attempt limit.
func (e *engine) fail(a *state.Atom, reason string) {
	a.Attempts++
	a.LastFailure = dag.OneLine(reason, 500)
	if !e.infra {
		e.book.SweepReported = true
	}
	a.Status = state.StatusPending
	e.dirty = true
	e.say("%s failed (attempt %d): %s (its output: aot logs %s)", a.ID, a.Attempts, dag.OneLine(reason, 240), a.ID)
	// An OR choice backtracks to the next choice on its first failure; the
	// last choice standing is retried like any atom before the group is
	// exhausted.
	if g := e.s.ORGroup(a.ORGroup); g != nil && a.ORGroup != "" && !(lastChoice(g, a.ID) && a.Attempts < e.maxAttempts()) {
		res, err := dag.FailOR(e.s, a.ID, reason, e.now())
		if err == nil {
			e.structural()
			if res.Exhausted {
				e.event(journal.Event{Type: journal.ORExhausted, Atom: a.ID, Reason: dag.ExhaustedReason(res.Group)})
				return
			}
			if res.Selected != a.ID {
				e.event(journal.Event{Atom: res.Selected, Reason: a.ID + " failed"}.With(journal.ORSwitchData{ORGroup: res.Group, Failed: a.ID}))
				e.say("OR group %s: %s failed, switched to %s", res.Group, a.ID, res.Selected)
			}
			return
		}
	}
	if a.Attempts >= e.maxAttempts() {
		// Out of attempts: parked. The rest of the graph goes on; the loop
		// stops on max_attempts when nothing else can run.
		delete(e.ready, a.ID)
		e.event(journal.Event{Type: journal.Parked, Atom: a.ID, Attempt: a.Attempts, Reason: fmt.Sprintf("failed %d times (max_attempts_per_atom %d)", a.Attempts, e.maxAttempts())})
		e.say("%s: out of attempts (%d); the rest of the graph goes on", a.ID, a.Attempts)
		return
	}
	switch {
	case e.infra:
		e.book.Next[a.ID] = agent.Worker
	case a.Attempts == 1:
		e.book.Next[a.ID] = agent.Probe
	case !e.book.Planned[a.ID]:
		e.book.Next[a.ID] = agent.Planner
	default:
		e.book.Next[a.ID] = agent.Worker
	}
	e.backoff(a)
}

// lastChoice reports whether id is the only choice of g that has not failed.
func lastChoice(g *state.ORGroup, id string) bool {
	for _, c := range g.Choices {
		if c != id && !slices.Contains(g.Failed, c) {
			return false
		}
	}
	return true
}

// taskMerge is what isolation did with an attempt, for integrate.
type taskMerge struct {
	attempt workspace.Attempt
	merge   *workspace.Merge
	kept    bool
	expect  bool // the atom expects its worker to change files (expect_changes)
}

// mergeOutcome turns a merge into the attempt's result: a conflict is a
// failed attempt (re-run on the merged work); otherwise the atom's artifacts
// are the files its merge changed, and a difference from the agent's claim
// is recorded.
func (e *engine) mergeOutcome(t *task, r *taskResult) (conflict string) {
	tm := r.iso
	if tm == nil || tm.merge == nil {
		return ""
	}
	mr := tm.merge
	data := journal.MergeData{Worktree: tm.attempt.Path, Branch: tm.attempt.Branch, Changed: mr.Changed, Commit: mr.Commit}
	if len(mr.Unclaimed) > 0 {
		data.Unclaimed = mr.Unclaimed
	}
	if len(mr.Missing) > 0 {
		data.ClaimedButUnchanged = mr.Missing
	}
	e.event(journal.Event{Atom: t.atom, Attempt: t.attempt, OK: journal.Bool(!mr.Conflict)}.With(data))
	if mr.Conflict {
		return "conflict: " + strings.Join(mr.ConflictFiles, ", ") + " changed by another atom since this attempt began; it is re-run on the merged work"
	}
	r.res.Artifacts = append([]string{}, mr.Changed...)
	if len(mr.Unclaimed)+len(mr.Missing) > 0 {
		e.say("%s: its merge changed %d files; the agent claimed otherwise (unclaimed %v, claimed but unchanged %v)", t.atom, len(mr.Changed), mr.Unclaimed, mr.Missing)
	}
	return ""
}
