package engine

import (
	"context"
	"errors"
)

// Reason is why a run ended. Each has its own exit code and is written to
// control.stop_reason and the journal.
type Reason string

// Stop reasons, in the order of their exit codes.
const (
	Completed     Reason = "completed"      // the base case passed
	Failed        Reason = "error"          // the engine could not go on (I/O, invalid state)
	ManualStop    Reason = "manual_stop"    // aot stop, Ctrl-C or a signal
	MaxIterations Reason = "max_iterations" // constraints.max_iterations reached
	Stalled       Reason = "stall"          // constraints.max_stall_count sweeps without progress
	ORExhausted   Reason = "or_exhausted"   // every choice of an OR group failed
	Deadlock      Reason = "deadlock"       // atoms pending, none can ever start
	Budget        Reason = "budget"         // wall time, tokens or cost spent
	MaxAttempts   Reason = "max_attempts"   // an atom failed max_attempts_per_atom times
	UsageLimit    Reason = "usage_limit"    // the agent's provider refused: quota or rate limit
)

// ExitCode is the process exit code of aot run for the reason. 2 is kept
// for usage errors.
func (r Reason) ExitCode() int {
	switch r {
	case Completed:
		return 0
	case ManualStop:
		return 3
	case MaxIterations:
		return 4
	case Stalled:
		return 5
	case ORExhausted:
		return 6
	case Deadlock:
		return 7
	case Budget:
		return 8
	case MaxAttempts:
		return 9
	case UsageLimit:
		return 10
	}
	return 1
}

// ExitCodes documents the table, for aot help run and the README.
const ExitCodes = `Exit codes of aot run (one per stop reason, also written to
control.stop_reason and the journal):
  0  completed       the base case passed (checked by aot, never on an agent's word)
  1  error           the engine could not go on (unreadable or invalid state, I/O)
  2  usage           a bad flag or argument; the state file is untouched
  3  manual_stop     aot stop, Ctrl-C, SIGTERM or SIGHUP; running agents were killed
  4  max_iterations  constraints.max_iterations reached
  5  stall           constraints.max_stall_count sweeps in a row without progress
  6  or_exhausted    every choice of an OR group failed
  7  deadlock        atoms are pending but none can ever start
  8  budget          max_wall_time, max_tokens or max_cost_usd spent
  9  max_attempts    an atom failed constraints.max_attempts_per_atom times
                     (default 10) and nothing else can run
  10 usage_limit     the agent answered {"usage_limit": true} without a reset time
                     (retry_at) or with --no-wait: its provider's quota
                     or rate limit; the atom is not charged an attempt`

// Interruption names what interrupted the run: the signal when the CLI
// cancelled with one as the cause.
func Interruption(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded) {
		return "interrupted: " + c.Error()
	}
	return "interrupted (Ctrl-C or a signal)"
}
