package engine

import (
	"time"

	"github.com/aot-loop/aot/internal/agent"
)

// Carry is the engine's bookkeeping beyond the state: what it has spent,
// what it has learnt about atoms, where the sweep and the rate limits
// stand. The engine keeps it as one value, so that a driver hands it whole
// to the next engine of the same loop when nothing is in flight
// (Temporal's Continue-As-New: Core.Carry, then CoreOptions.Carry). Its
// JSON is part of recorded workflow histories: a field may be added, never
// renamed or retagged.
type Carry struct {
	Usage          agent.Usage           `json:"usage"`             // the loop's total, across runs
	Unknown        int                   `json:"unknown,omitempty"` // attempts whose usage nobody reported
	Start          time.Time             `json:"start"`
	PausedFor      time.Duration         `json:"paused_for,omitempty"`      // paused time in this run, not charged to max_wall_time
	StartIteration int                   `json:"start_iteration,omitempty"` // control.iteration when this run started
	Paused         *PauseInfo            `json:"paused,omitempty"`          // a person paused the loop: nothing new starts
	Next           map[string]agent.Role `json:"next,omitempty"`            // the strategy for an atom's next run
	Notes          map[string]string     `json:"notes,omitempty"`           // probe findings for the next worker
	Planned        map[string]bool       `json:"planned,omitempty"`         // the planner was already asked about this atom
	Waiting        map[string]time.Time  `json:"waiting,omitempty"`         // atom -> when its backoff ends
	Reopens        map[string]int        `json:"reopens,omitempty"`         // atom -> times a failing check reopened it in this run
	// Repairs counts the repair sweeps in this run (sweep.go): sweeps spent
	// redoing work a check found broken are not charged to max_iterations.
	Repairs int `json:"repairs,omitempty"`
	Expands int `json:"expands,omitempty"` // iterations in a row that only grew the graph
	// QuotaUntil and RateUntil: a usage or rate limit, start nothing
	// before then. RateInRow counts the rate-limited answers since the
	// last other answer; RateCap is how many agents run at once while it
	// lasts (0: no cap).
	QuotaUntil time.Time       `json:"quota_until,omitempty"`
	RateUntil  time.Time       `json:"rate_until,omitempty"`
	RateInRow  int             `json:"rate_in_row,omitempty"`
	RateCap    int             `json:"rate_cap,omitempty"`
	Attempted  map[string]bool `json:"attempted,omitempty"` // atoms with a finished worker attempt in this sweep
	SweepStart int             `json:"sweep_start"`         // unresolved atoms when the sweep began
	// SweepReported: an agent reported a failure in this sweep (not only
	// crashes, timeouts or garbage); only such a sweep can be a stall.
	SweepReported bool `json:"sweep_reported,omitempty"`
	SweepRepair   bool `json:"sweep_repair,omitempty"` // an atom was reopened in this sweep
	// What the last verifications found, so that nothing is checked again
	// while the work has not changed: Gen is bumped by every change that
	// may affect the base case; DepGen and VerifiedGen are Gen at the last
	// dependency check and verification (-1: none).
	Gen         int      `json:"gen,omitempty"`
	DepGen      int      `json:"dep_gen"`
	VerifiedGen int      `json:"verified_gen"`
	VerifyFails []string `json:"verify_fails,omitempty"`
	// The run's own bounds (--max-parallel, --max-iterations), until a
	// redirect sets the constraints.
	MaxParallel   int `json:"max_parallel,omitempty"`
	MaxIterations int `json:"max_iterations,omitempty"`
}

// fill gives the maps a decoded Carry left out (omitempty) their empty
// value, so that the engine can write to them.
func (b *Carry) fill() {
	b.Next = orEmpty(b.Next)
	b.Notes = orEmpty(b.Notes)
	b.Planned = orEmpty(b.Planned)
	b.Waiting = orEmpty(b.Waiting)
	b.Reopens = orEmpty(b.Reopens)
	b.Attempted = orEmpty(b.Attempted)
}

func orEmpty[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}
