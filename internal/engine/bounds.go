package engine

import (
	"fmt"
	"time"

	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/state"
)

// applyBounds takes the run's bounds from the constraints and the run's
// options; a redirect calls it again so that new bounds apply at once.
func (e *engine) applyBounds() {
	c := e.s.Objective.Constraints
	e.parallel = c.MaxParallelAgents
	if e.book.MaxParallel > 0 {
		e.parallel = e.book.MaxParallel
	}
	if e.parallel <= 0 {
		e.parallel = state.DefaultMaxParallelAgents
	}
	if e.isoCap > 0 && e.parallel > e.isoCap {
		e.parallel = e.isoCap
	}
	e.maxIter = c.MaxIterations
	if e.book.MaxIterations > 0 {
		// --max-iterations N: at most N iterations in this run.
		e.maxIter = e.book.StartIteration + e.book.MaxIterations
	}
}

// maxAttempts is the effective max_attempts_per_atom.
func (e *engine) maxAttempts() int {
	if m := e.s.Objective.Constraints.MaxAttemptsPerAtom; m > 0 {
		return m
	}
	return DefaultMaxAttemptsPerAtom
}

func (e *engine) failed(err error) Outcome {
	return e.outcome(Failed, err.Error())
}

// bounds checks every halting condition that does not need an event. Stall
// and max_iterations wait for running agents (draining): one of them may
// still succeed, and its work is not thrown away.
func (e *engine) bounds() (Outcome, bool) {
	c := &e.s.Objective.Constraints
	switch {
	case e.halt != nil:
		return e.outcome(e.halt.Reason, e.halt.Message), true
	case e.stop != nil:
		return e.outcome(ManualStop, "manual stop: "+*e.stop), true
	case e.s.Control.Status == state.ControlStopped:
		return e.outcome(ORExhausted, deref(e.s.Control.StopReason)), true
	}
	if c.MaxWallTime != "" {
		if d, err := state.ParseDuration(c.MaxWallTime); err == nil && d > 0 && e.active() >= d {
			return e.outcome(Budget, fmt.Sprintf("budget: max_wall_time %s spent in this run; raise it with aot redirect --reason R --max-wall-time D", c.MaxWallTime)), true
		}
	}
	if tokens := e.book.Usage.Tokens(); c.MaxTokens > 0 && tokens >= c.MaxTokens {
		return e.outcome(Budget, fmt.Sprintf("budget: %d tokens spent by the loop (max_tokens %d); raise it with aot redirect --reason R --max-tokens N", tokens, c.MaxTokens)), true
	}
	if c.MaxCostUSD > 0 && e.book.Usage.CostUSD >= c.MaxCostUSD {
		return e.outcome(Budget, fmt.Sprintf("budget: $%.4f spent by the loop (max_cost_usd %g); raise it with aot redirect --reason R --max-cost USD", e.book.Usage.CostUSD, c.MaxCostUSD)), true
	}
	var out Outcome
	switch {
	case e.maxIter > 0 && e.s.Control.Iteration-e.book.Repairs >= e.maxIter:
		repairs := ""
		if e.book.Repairs > 0 {
			repairs = fmt.Sprintf(" (and %s redoing work a check found broken, not counted)", brief.Count(e.book.Repairs, "more iteration"))
		}
		if e.book.MaxIterations > 0 {
			out = e.outcome(MaxIterations, fmt.Sprintf("max_iterations: %d iterations done in this run (--max-iterations %d)%s", e.s.Control.Iteration-e.book.StartIteration-e.book.Repairs, e.book.MaxIterations, repairs))
		} else {
			out = e.outcome(MaxIterations, fmt.Sprintf("max_iterations: %d of %d iterations done%s; raise the bound with aot redirect --reason R --max-iterations N, or run N more with aot run --max-iterations N", e.s.Control.Iteration-e.book.Repairs, e.maxIter, repairs))
		}
	case c.MaxStallCount > 0 && e.s.Control.StallCount >= c.MaxStallCount:
		out = e.outcome(Stalled, fmt.Sprintf("stall: %d sweeps in a row without progress (%d unresolved); aot run starts a new stall window, aot redirect --reason R --max-stall N raises the bound", e.s.Control.StallCount, e.unresolvedCount()))
	default:
		e.draining = false
		return Outcome{}, false
	}
	if e.runningWorkers() > 0 {
		if !e.draining {
			e.say("%s; waiting for the running agents before stopping", out.Message)
		}
		e.draining = true
		return Outcome{}, false
	}
	return out, true
}

func (e *engine) outcome(r Reason, msg string) Outcome {
	resolved := 0
	for i := range e.s.Atoms {
		if e.s.Atoms[i].Status == state.StatusResolved {
			resolved++
		}
	}
	return Outcome{
		Reason: r, ExitCode: r.ExitCode(), Message: msg,
		Iterations: e.s.Control.Iteration, Resolved: resolved, Unresolved: dag.Unresolved(e.s),
		Usage: e.book.Usage, UnknownUsage: e.book.Unknown, Elapsed: e.now().Sub(e.book.Start).Round(time.Millisecond).String(),
	}
}

// stopWith ends the loop at the next bounds check with a reason that has no
// check of its own.
func (e *engine) stopWith(r Reason, msg string) {
	e.halt = &Outcome{Reason: r, Message: msg}
}
