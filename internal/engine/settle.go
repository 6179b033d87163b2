package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/state"
)

// idle runs when no agent is running and nothing could start: the loop is
// done with its atoms (verify), deadlocked, out of attempts on an atom, or
// stopped by an OR exhaustion.
func (e *engine) idle(ctx context.Context) (Outcome, bool) {
	if e.s.Control.Status == state.ControlStopped {
		return e.giveUp(ctx, e.outcome(ORExhausted, deref(e.s.Control.StopReason))), true
	}
	if e.unresolvedCount() > 0 {
		if g := exhaustedGroup(e.s); g != "" {
			return e.giveUp(ctx, e.outcome(ORExhausted, dag.ExhaustedReason(g)+"; add a choice with aot redirect --add-atom or switch with aot or switch")), true
		}
		if msg := e.parkedMessage(); msg != "" {
			return e.giveUp(ctx, e.outcome(MaxAttempts, msg)), true
		}
		waits := dag.Deadlock(e.s)
		out := e.outcome(Deadlock, deadlockMessage(waits))
		out.Waits = waits
		return e.giveUp(ctx, out), true
	}
	passed, failures, err := e.verify(ctx, true)
	if e.stop != nil {
		return e.outcome(ManualStop, "manual stop: "+*e.stop), true
	}
	if err != nil {
		return e.failed(err), true
	}
	if passed {
		return e.outcome(Completed, "the base case passed"), true
	}
	// Work an agent claimed but the checks do not find goes back to work;
	// otherwise the planner proposes atoms to fix what fails.
	if e.reopen(failures) == 0 {
		e.plan(ctx, "", failures)
	}
	// A verification round is an iteration of its own.
	e.endIteration()
	e.newSweep()
	return Outcome{}, false
}

// giveUp is the last step before any stop other than completed, manual stop
// or error: aot checks the base case itself, and a loop whose work is done
// completes whatever bound it reached. Otherwise the stop names the checks
// that fail.
func (e *engine) giveUp(ctx context.Context, out Outcome) Outcome {
	switch out.Reason {
	case Completed, ManualStop, Failed:
		return out
	}
	e.killAll("the loop is stopping: " + string(out.Reason))
	// Spending more on judges would break a budget or hit the same quota.
	judges := out.Reason != Budget && out.Reason != UsageLimit
	passed, failures, err := e.verify(ctx, judges)
	if e.stop != nil {
		return e.outcome(ManualStop, "manual stop: "+*e.stop)
	}
	if err != nil {
		return e.failed(err)
	}
	if passed {
		return e.outcome(Completed, "the base case passed (checked before stopping on "+string(out.Reason)+": "+out.Message+")")
	}
	if len(failures) > 0 {
		out.Message += "; the base case fails: " + strings.Join(failures, "; ")
	}
	out.Failures = failures
	return out
}

func deadlockMessage(waits []dag.Wait) string {
	if len(waits) == 0 {
		return "deadlock: atoms are unresolved but none can start"
	}
	var parts []string
	for _, w := range waits {
		parts = append(parts, fmt.Sprintf("%s waits on %s", w.Atom, orNone(w.WaitsOn)))
	}
	return "deadlock: " + strings.Join(parts, "; ")
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "nothing that can finish"
	}
	return strings.Join(list, ", ")
}
