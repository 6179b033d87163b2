package durable

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// Sweeps and iterations are counted as the engine counts them (see
// engine/sweep.go): a sweep ends when every executable atom has had a
// finished attempt since it began; fewer unresolved atoms than at its start
// is progress, the same count a stall (unless every failure was the
// machinery's). An iteration is a sweep, or a verification round.

func (l *loop) newSweep() {
	l.attempted = map[string]bool{}
	l.unattempted = map[string]bool{}
	l.sweepReported = false
	if l.reshape {
		l.rebuild()
	}
	l.sweepStart = l.unresolved
	l.recountSweep()
}

// recountSweep recomputes the atoms the sweep still waits for.
func (l *loop) recountSweep() {
	if l.attempted == nil {
		return
	}
	un := map[string]bool{}
	add := func(id string) {
		if !l.attempted[id] {
			un[id] = true
		}
	}
	for id := range l.ready {
		add(id)
	}
	for id := range l.waiting {
		add(id)
	}
	for _, t := range l.tasks {
		if a := l.ix.Atom(t.atom); !t.discarded && a != nil && a.Status != state.StatusResolved {
			add(t.atom)
		}
	}
	l.unattempted = un
}

// attemptDone records a finished attempt (or a resolution) of id.
func (l *loop) attemptDone(id string) {
	l.attempted[id] = true
	delete(l.unattempted, id)
}

// checkSweep ends the sweep when no executable atom is left untried; it
// reports whether one ended.
func (l *loop) checkSweep() bool {
	if len(l.unattempted) > 0 || len(l.attempted) == 0 || l.paused != nil {
		return false
	}
	l.endIteration()
	l.newSweep()
	return true
}

// endIteration evaluates a sweep or a verification round.
func (l *loop) endIteration() string {
	c := &l.s.Control
	c.Iteration++
	if l.reshape {
		l.rebuild()
	}
	u := l.unresolved
	kind := "progress"
	switch {
	case u < l.sweepStart:
		c.StallCount = 0
	case len(l.attempted) > 0 && !l.sweepReported:
		kind = "retry" // only crashes, timeouts or garbage: bounded per atom
	default:
		c.StallCount++
		kind = "stall"
	}
	c.PrevPendingCount = u
	l.dirty = true
	return kind
}

// bounds checks the halting conditions as the engine's bounds: a halt
// decided in a step, an exhausted OR group, max_wall_time (paused time not
// charged), max_tokens, max_cost_usd, then max_iterations and the stall
// bound, which wait for the running attempts (draining).
func (l *loop) bounds(ctx workflow.Context) (Outcome, bool) {
	c := &l.s.Objective.Constraints
	switch {
	case l.halt != nil:
		return *l.halt, true
	case l.s.Control.Status == state.ControlStopped:
		return outcomeOf(engine.ORExhausted, deref(l.s.Control.StopReason)), true
	}
	if d := l.wallTime(); d > 0 && l.active(workflow.Now(ctx)) >= d {
		return outcomeOf(engine.Budget, fmt.Sprintf("budget: max_wall_time %s spent in this run; raise it with aot redirect --reason R --max-wall-time D", c.MaxWallTime)), true
	}
	if tokens := l.usage.InputTokens + l.usage.OutputTokens; c.MaxTokens > 0 && tokens >= c.MaxTokens {
		return outcomeOf(engine.Budget, fmt.Sprintf("budget: %d tokens spent by the loop (max_tokens %d); raise it with aot redirect --reason R --max-tokens N", tokens, c.MaxTokens)), true
	}
	if c.MaxCostUSD > 0 && l.usage.CostUSD >= c.MaxCostUSD {
		return outcomeOf(engine.Budget, fmt.Sprintf("budget: $%.4f spent by the loop (max_cost_usd %g); raise it with aot redirect --reason R --max-cost USD", l.usage.CostUSD, c.MaxCostUSD)), true
	}
	var out Outcome
	switch {
	case l.maxIter > 0 && l.s.Control.Iteration >= l.maxIter:
		if l.in.MaxIterations > 0 {
			out = outcomeOf(engine.MaxIterations, fmt.Sprintf("max_iterations: %d iterations done in this run (--max-iterations %d)", l.s.Control.Iteration-l.startIter, l.in.MaxIterations))
		} else {
			out = outcomeOf(engine.MaxIterations, fmt.Sprintf("max_iterations: %d of %d iterations done; raise the bound with aot redirect --reason R --max-iterations N", l.s.Control.Iteration, l.maxIter))
		}
	case c.MaxStallCount > 0 && l.s.Control.StallCount >= c.MaxStallCount:
		out = outcomeOf(engine.Stalled, fmt.Sprintf("stall: %d sweeps in a row without progress (%d unresolved); aot redirect --reason R --max-stall N raises the bound", l.s.Control.StallCount, l.unresolved))
	default:
		l.draining = false
		return Outcome{}, false
	}
	if l.inFlight() > 0 {
		l.draining = true // one of them may still succeed
		return Outcome{}, false
	}
	return out, true
}

// idle runs when nothing is in flight and nothing could start: the work is
// done (verify), an OR group is exhausted, an atom is out of attempts, or
// the graph is deadlocked.
func (l *loop) idle(ctx workflow.Context) (Outcome, bool) {
	if l.reshape {
		l.rebuild()
	}
	if l.unresolved > 0 {
		if g := exhausted(l.s); g != "" {
			return l.giveUp(ctx, outcomeOf(engine.ORExhausted, dag.ExhaustedReason(g)+"; add a choice with aot redirect --add-atom or switch with aot or switch")), true
		}
		if msg := l.parkedMessage(); msg != "" {
			return l.giveUp(ctx, outcomeOf(engine.MaxAttempts, msg)), true
		}
		return l.giveUp(ctx, outcomeOf(engine.Deadlock, deadlockText(dag.Deadlock(l.s)))), true
	}
	gen := l.gen
	v, err := l.verify(ctx)
	switch {
	case ctx.Err() != nil:
		return Outcome{}, false // the loop's top ends it as a manual stop
	case gen != l.gen:
		return Outcome{}, false // a redirect changed the loop meanwhile: look again
	case err != nil:
		return outcomeOf(engine.Failed, "base case: "+err.Error()), true
	case v.Passed:
		return outcomeOf(engine.Completed, "the base case passed"), true
	}
	// The engine would reopen atoms whose checks fail and ask the planner
	// for new ones; this workflow stops instead, naming the failures.
	l.endIteration()
	return outcomeOf(engine.Stalled, "stall: no atom is left and the base case fails: "+strings.Join(v.Failures, "; ")+"; add atoms with aot redirect --add-atom and run again"), true
}

// giveUp is the last step before a stop other than completed, manual stop
// or error: the base case is checked on the integration branch, and a loop
// whose work is done completes whatever bound it reached. Budget and usage
// limits are not checked (verification may spend on judges).
func (l *loop) giveUp(ctx workflow.Context, out Outcome) Outcome {
	switch engine.Reason(out.Reason) {
	case engine.Completed, engine.ManualStop, engine.Failed, engine.Budget, engine.UsageLimit:
		return out
	}
	l.ending = true
	for _, seq := range l.seqs() {
		l.kill(l.tasks[seq], "the loop is stopping: "+out.Reason)
	}
	v, err := l.verify(ctx)
	switch {
	case ctx.Err() != nil || err != nil:
		return out
	case v.Passed:
		return outcomeOf(engine.Completed, "the base case passed (checked before stopping on "+out.Reason+": "+out.Message+")")
	case len(v.Failures) > 0:
		out.Message += "; the base case fails: " + strings.Join(v.Failures, "; ")
	}
	return out
}

// verify runs the base case on the integration branch's head.
func (l *loop) verify(ctx workflow.Context) (VerifyResult, error) {
	var v VerifyResult
	in := VerifyInput{Repo: l.in.Repo, Commit: l.head, State: state.Marshal(l.s)}
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, l.verifyOptions()), VerifyActivity, in).Get(ctx, &v)
	l.finished++
	return v, err
}

// parkedMessage names the atoms out of attempts, or "" when there are none.
func (l *loop) parkedMessage() string {
	var parts []string
	for i := range l.s.Atoms {
		if a := &l.s.Atoms[i]; l.parked(a) {
			parts = append(parts, fmt.Sprintf("%s failed %d times (last: %s)", a.ID, a.Attempts, dag.OneLine(a.LastFailure, 200)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("max_attempts: %s; raise max_attempts_per_atom (%d) with aot redirect --reason R --max-attempts N, or change the atom with aot redirect", strings.Join(parts, "; "), l.maxAttempts())
}

// exhausted returns an OR group whose choices have all failed, if any.
func exhausted(s *state.State) string {
	for _, g := range s.ORGroups {
		if len(g.Choices) > 0 && !slices.ContainsFunc(g.Choices, func(c string) bool { return !slices.Contains(g.Failed, c) }) {
			return g.Name
		}
	}
	return ""
}

func deadlockText(waits []dag.Wait) string {
	if len(waits) == 0 {
		return "deadlock: atoms are unresolved but none can start"
	}
	parts := make([]string, 0, len(waits))
	for _, w := range waits {
		on := "nothing that can finish"
		if len(w.WaitsOn) > 0 {
			on = strings.Join(w.WaitsOn, ", ")
		}
		parts = append(parts, w.Atom+" waits on "+on)
	}
	return "deadlock: " + strings.Join(parts, "; ")
}

// wallTime is max_wall_time, 0 when there is none.
func (l *loop) wallTime() time.Duration {
	w := l.s.Objective.Constraints.MaxWallTime
	if w == "" {
		return 0
	}
	d, err := state.ParseDuration(w)
	if err != nil {
		return 0
	}
	return d
}

// active is the time the loop has been allowed to work: paused time is not
// charged to max_wall_time.
func (l *loop) active(now time.Time) time.Duration {
	d := now.Sub(l.started) - l.pausedFor
	if l.paused != nil {
		d -= now.Sub(l.paused.since)
	}
	return d
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
