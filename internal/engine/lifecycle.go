package engine

import (
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// startRun journals how the run starts, puts work orphaned by an earlier
// run back to pending and marks the loop running. crash is the data of a
// resume after a crash (a loop found running with no engine): the number
// of results replayed; nil when a loop found running was started elsewhere
// (a Core's driver marks it so).
func (e *engine) startRun(crash *int) {
	s := e.s
	agents, confinement := e.runData()
	switch prev := s.Control.Status; {
	case prev == state.ControlRunning && crash != nil:
		e.event(journal.Event{Reason: "the previous engine is gone (crash or kill); resuming"}.With(
			journal.RunResumeData{Agents: agents, Confinement: confinement, Replayed: crash}))
	case prev == state.ControlStopped || prev == state.ControlCompleted:
		e.event(journal.Event{Reason: "resuming a " + prev + " loop"}.With(journal.RunResumeData{Agents: agents, Confinement: confinement,
			PreviousStopReason: journal.Ref(deref(s.Control.StopReason)), StallCount: journal.Ref(s.Control.StallCount)}))
		// A person ran the loop again: the stall window starts afresh.
		s.Control.StallCount = 0
	default:
		e.event(journal.Event{}.With(journal.RunStartData{Agents: agents, Confinement: confinement}))
	}
	for i := range s.Atoms {
		if a := &s.Atoms[i]; a.Status == state.StatusInProgress {
			a.Status = state.StatusPending
			e.event(journal.Event{Type: journal.AtomReset, Atom: a.ID, Reason: "orphaned: in progress when the previous run ended"})
		}
	}
	s.Control.Status = state.ControlRunning
	s.Control.StopRequested = false
	s.Control.StopReason = nil
	s.Control.RedirectRequested = false
	e.book.StartIteration = s.Control.Iteration
}

// conclude records how the loop ended in the state and the journal, once
// nothing runs any more; landing says where the merged work is.
func (e *engine) conclude(out *Outcome, landing string) {
	if e.halt != nil && out.Reason == "" {
		*out = e.outcome(e.halt.Reason, e.halt.Message)
	}
	e.killAll("the loop stopped: " + string(out.Reason))
	e.book.Paused = nil
	c := &e.s.Control
	if out.Reason == Completed {
		c.Status = state.ControlCompleted
		c.StopReason = nil
	} else {
		c.Status = state.ControlStopped
		msg := out.Message
		c.StopReason = &msg
	}
	c.StopRequested = false
	waits, failures := out.Waits, out.Failures
	*out = e.outcome(out.Reason, out.Message)
	out.Waits, out.Failures, out.Landing = waits, failures, landing
	if landing != "" {
		e.say("%s", landing)
	}
	e.event(journal.Event{Reason: string(out.Reason)}.With(journal.StopData{Message: out.Message, ExitCode: out.ExitCode}))
	e.dirty = true
}
