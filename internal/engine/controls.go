package engine

import "github.com/aot-loop/aot/internal/state"

// What the controls a person has over a loop (stop, redirect, pause,
// resume) answer, whichever driver runs the loop: the local run's controls
// (package local) and the Temporal workflow's (package durable) say the
// same things, so the CLI and the server tell them apart the same way.

// StopResult is what a stop did.
type StopResult struct {
	EnginePID int    // the engine that was asked to stop; 0 when none ran
	Status    string // the loop's control status afterwards
	Reason    string // the stop reason in the state file
}

// StopResultOf is what a stop left in s, the state file once the loop
// stopped: its status and stop reason.
func StopResultOf(s *state.State, enginePID int) StopResult {
	res := StopResult{EnginePID: enginePID, Status: s.Control.Status}
	if s.Control.StopReason != nil {
		res.Reason = *s.Control.StopReason
	}
	return res
}

// AddedCorrections are the types of the corrections after has and before
// had not: what a redirect recorded.
func AddedCorrections(before, after *state.State) []string {
	out := []string{}
	for _, c := range after.Corrections[min(len(before.Corrections), len(after.Corrections)):] {
		out = append(out, c.Type)
	}
	return out
}

// RedirectResult is what a redirect did.
type RedirectResult struct {
	AppliedBy   string   // engine or file
	Corrections []string // the types of the corrections recorded
}

// RefusedError is a change the loop refused (an unknown atom, a cycle, a
// bad bound), as opposed to a failure to deliver it.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// ErrNoEngine: pause and resume act on a running engine only.
type ErrNoEngine struct{ StateFile string }

func (e *ErrNoEngine) Error() string {
	return "no engine runs the loop of " + e.StateFile + "; start it with aot run"
}
