package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// A sweep is the loop's unit of progress: it ends when every executable atom
// has had a finished worker attempt since the sweep began (atoms that become
// executable during the sweep join it). An iteration is a sweep, or a
// verification round when no atom is left. A sweep that ends with fewer
// unresolved atoms than it began with is progress; the same count is a
// stall. So a stall means the whole loop moved nothing, never that one atom
// failed while others were still being tried, and a stall stop waits for the
// agents still running (draining).

// newSweep starts a sweep: every atom that is executable now (ready,
// running, or waiting out a backoff) must get an attempt before it ends.
func (e *engine) newSweep() {
	e.book.SweepRepair = false
	e.book.Attempted = map[string]bool{}
	e.unattempted = map[string]bool{}
	e.book.SweepReported = false
	e.book.SweepStart = e.unresolvedCount()
	e.recountSweep()
}

// recountSweep recomputes the atoms the sweep still waits for, after the
// graph's shape changed.
func (e *engine) recountSweep() {
	if e.book.Attempted == nil {
		return
	}
	un := map[string]bool{}
	add := func(id string) {
		if !e.book.Attempted[id] {
			un[id] = true
		}
	}
	for id := range e.ready {
		add(id)
	}
	for id := range e.book.Waiting {
		add(id)
	}
	for _, t := range e.tasks {
		if !t.discarded {
			if a := e.ix.Atom(t.atom); a != nil && a.Status != state.StatusResolved {
				add(t.atom)
			}
		}
	}
	e.unattempted = un
}

// attemptDone records a finished worker attempt (or a resolution) of id.
func (e *engine) attemptDone(id string) {
	e.book.Attempted[id] = true
	delete(e.unattempted, id)
}

// checkSweep ends the sweep when no executable atom is left untried.
// It reports whether the sweep ended without progress.
func (e *engine) checkSweep() bool {
	if len(e.unattempted) > 0 || len(e.book.Attempted) == 0 {
		return false
	}
	stall := e.endIteration() == "stall"
	e.newSweep()
	return stall
}

// afterStall looks for the cause of a sweep without progress in work done
// earlier: the base case's checks (commands and files, no judge) are run,
// and resolved atoms whose checks fail are reopened (a later atom may have
// broken them, so their dependents keep failing). A sweep that finds such
// work is not counted as a stall. When the checks all pass, the loop is
// done.
func (e *engine) afterStall(ctx context.Context) (Outcome, bool) {
	resolved := false
	for i := range e.s.Atoms {
		if e.s.Atoms[i].Status == state.StatusResolved {
			resolved = true
			break
		}
	}
	if !resolved {
		return Outcome{}, false
	}
	passed, failures, err := e.verify(ctx, false)
	switch {
	case e.stop != nil:
		return e.outcome(ManualStop, "manual stop: "+*e.stop), true
	case err != nil:
		return e.failed(err), true
	case passed && !e.needsJudge():
		return e.outcome(Completed, "the base case passed (checked after a sweep without progress)"), true
	}
	if n := e.reopen(failures); n > 0 && e.s.Control.StallCount > 0 {
		e.s.Control.StallCount--
		e.expanded = false
		e.event(journal.Event{Iteration: e.s.Control.Iteration, Reason: "stall explained"}.With(journal.IterationData{Reopened: n, StallCount: e.s.Control.StallCount}))
	}
	return Outcome{}, false
}

// needsJudge reports whether the base case has checks only a judge decides.
func (e *engine) needsJudge() bool {
	judged := false
	var walk func([]state.ChecklistItem)
	walk = func(items []state.ChecklistItem) {
		for _, it := range items {
			if it.Check != nil && (it.Check.Type == state.CheckAssertion || it.Check.Type == state.CheckQuality) {
				judged = true
			}
			walk(it.Group)
			walk(it.AnyOf)
		}
	}
	if bc := e.s.Objective.BaseCase; bc != nil {
		walk(bc.Checklist)
		if bc.Legacy != nil && (bc.Legacy.Type == state.CheckAssertion || bc.Legacy.Type == state.CheckQuality) {
			judged = true
		}
	}
	return judged
}

// runningWorkers counts the worker attempts in flight.
func (e *engine) runningWorkers() int {
	n := 0
	for _, t := range e.tasks {
		if !t.discarded {
			n++
		}
	}
	return n
}

// backoff makes a failed atom wait before its next step: other executable
// atoms get the slots meanwhile. The wait doubles with each failure up to
// MaxBackoff.
func (e *engine) backoff(a *state.Atom) {
	d := e.opts.RetryBackoff
	for i := 1; i < a.Attempts && d < e.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, e.opts.MaxBackoff)
	until := e.now().Add(d)
	e.book.Waiting[a.ID] = until
	delete(e.ready, a.ID)
	e.event(journal.Event{Atom: a.ID, Attempt: a.Attempts, DurationMS: d.Milliseconds()}.With(journal.BackoffData{Until: until.Format(time.RFC3339Nano)}))
}

// release makes the atoms whose backoff has ended ready again.
func (e *engine) release() {
	e.quotaResumed()
	if len(e.book.Waiting) == 0 {
		return
	}
	now := e.now()
	for id, until := range e.book.Waiting {
		if now.Before(until) {
			continue
		}
		delete(e.book.Waiting, id)
		if _, running := e.busy[id]; !running && e.ix.Ready(id) {
			e.markReady(id)
		}
	}
}

// waitingForTime reports whether the loop has nothing to run now but will
// have: an atom waits out its backoff, or the agent's quota resets.
func (e *engine) waitingForTime() bool {
	return len(e.book.Waiting) > 0 || e.now().Before(e.book.QuotaUntil) || e.now().Before(e.book.RateUntil)
}

// parked reports whether an atom has used up max_attempts_per_atom: it is
// not tried again in this run, the rest of the graph goes on, and the loop
// stops on max_attempts when nothing else can run (after checking the base
// case).
func (e *engine) parked(a *state.Atom) bool {
	return a.Status == state.StatusPending && a.Attempts >= e.maxAttempts() && e.ix.Live(a.ID)
}

// parkedMessage names the atoms out of attempts, or "" when there are none.
func (e *engine) parkedMessage() string {
	var parts []string
	for i := range e.s.Atoms {
		a := &e.s.Atoms[i]
		if e.parked(a) {
			parts = append(parts, fmt.Sprintf("%s failed %d times (last: %s)", a.ID, a.Attempts, dag.OneLine(a.LastFailure, 200)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("max_attempts: %s; raise max_attempts_per_atom (%d) with aot redirect --reason R --max-attempts N, or change the atom with aot redirect", joinSemi(parts), e.maxAttempts())
}

func joinSemi(parts []string) string {
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += "; "
		}
		out += p
	}
	return out
}

// exhaustedGroup returns an OR group whose choices have all failed, if any.
func exhaustedGroup(s *state.State) string {
	for i := range s.ORGroups {
		g := &s.ORGroups[i]
		if len(g.Choices) == 0 {
			continue
		}
		all := true
		for _, c := range g.Choices {
			if !slices.Contains(g.Failed, c) {
				all = false
				break
			}
		}
		if all {
			return g.Name
		}
	}
	return ""
}

// workerRole reports whether a finished task was a worker attempt.
func workerRole(r agent.Role) bool { return r == agent.Worker }

// repairSweep says whether the sweep that ends redid work a check found
// broken: an atom was reopened in it, or every atom it attempted had been
// reopened in this run. Such a sweep is not charged to max_iterations. The
// loop still halts: an atom is reopened at most max_attempts_per_atom
// times in a run, and each of its failures is charged an attempt, so the
// attempts on reopened atoms, and with them the repair sweeps, are
// bounded.
func (e *engine) repairSweep() bool {
	if e.book.SweepRepair {
		return true
	}
	if len(e.book.Attempted) == 0 {
		return false
	}
	for id := range e.book.Attempted {
		if e.book.Reopens[id] == 0 {
			return false
		}
	}
	return true
}

// endIteration evaluates a sweep or a verification round: fewer unresolved
// atoms than when it began is progress; the same count is a stall; more,
// because the graph was expanded, is tolerated max_stall_count times in a
// row and then counts as a stall.
func (e *engine) endIteration() string {
	c := &e.s.Control
	c.Iteration++
	u := e.unresolvedCount()
	prev := e.book.SweepStart
	max := e.s.Objective.Constraints.MaxStallCount
	kind := "progress"
	switch {
	case u < prev:
		c.StallCount = 0
		e.book.Expands = 0
	case u > prev && e.expanded:
		e.book.Expands++
		kind = "expansion"
		if max > 0 && e.book.Expands > max {
			c.StallCount++
			kind = "stall"
		}
	case len(e.book.Attempted) > 0 && !e.book.SweepReported:
		// Only crashes, timeouts or garbage: they say nothing about whether
		// the work can be done, and are bounded per atom by
		// max_attempts_per_atom.
		kind = "retry"
	default:
		c.StallCount++
		e.book.Expands = 0
		kind = "stall"
	}
	c.PrevPendingCount = u
	e.expanded = false
	e.dirty = true
	data := journal.IterationData{Unresolved: journal.Ref(u), UnresolvedBefore: journal.Ref(prev), StallCount: c.StallCount, Attempted: journal.Ref(len(e.book.Attempted))}
	if e.repairSweep() {
		e.book.Repairs++
		data.Repair = true
	}
	e.event(journal.Event{Iteration: c.Iteration, Reason: kind}.With(data))
	if kind == "stall" {
		e.event(journal.Event{Iteration: c.Iteration}.With(journal.StallData{StallCount: c.StallCount, Unresolved: u}))
		e.say("iteration %d: no progress (stall %d of %d)", c.Iteration, c.StallCount, max)
	}
	return kind
}
