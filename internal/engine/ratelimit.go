package engine

import (
	"fmt"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
)

// Rate limits (HTTP 429, 503, 529 from the agent's provider) are not an
// atom's failure: the atom goes back as it was, not charged, and the loop
// waits (the provider's retry-after when it gave one, else a doubling
// back-off) and runs half as many agents at once until answers come back
// without one. Many in a row stop the loop as a usage limit.
const (
	rateFirstWait = 2 * time.Second
	rateMaxWait   = 2 * time.Minute
	// rateMaxInRow rate-limited answers in a row stop the loop.
	rateMaxInRow = 12
)

type rateState struct {
	until time.Time // start nothing before this
	inRow int       // rate-limited answers since the last other answer
	cap   int       // agents at once while it lasts; 0 = no cap
}

// slots is how many agents may run at once now.
func (e *engine) slots() int {
	if e.rate.cap > 0 && e.rate.cap < e.parallel {
		return e.rate.cap
	}
	return e.parallel
}

// rateLimited handles a rate-limited attempt of t.
func (e *engine) rateLimited(t *task, ae *agent.AttemptError) {
	e.rate.inRow++
	wait := ae.RetryAfter
	if wait <= 0 {
		wait = rateFirstWait
		for i := 1; i < e.rate.inRow && wait < rateMaxWait; i++ {
			wait *= 2
		}
	}
	wait = min(wait, rateMaxWait)
	until := e.now().Add(wait)
	if until.After(e.rate.until) {
		e.rate.until = until
	}
	running := len(e.tasks) + 1 // t was running too
	if c := max(1, min(e.slots(), running)/2); e.rate.cap == 0 || c < e.rate.cap {
		e.rate.cap = c
	}
	e.event(journal.Event{Type: journal.RateLimit, Atom: t.atom, Role: string(t.role), Attempt: t.attempt, Reason: ae.Reason, DurationMS: wait.Milliseconds()}.With(journal.RateLimitData{Until: e.rate.until.Format(time.RFC3339Nano), MaxParallel: e.rate.cap, InARow: e.rate.inRow, Kind: string(ae.Kind)}))
	e.say("rate limited (%s on %s): waiting %s, then at most %s at once", dag.OneLine(ae.Reason, 80), t.atom, wait.Round(time.Millisecond), brief.Count(e.rate.cap, "agent"))
	if e.rate.inRow >= rateMaxInRow {
		e.stopWith(UsageLimit, fmt.Sprintf("usage_limit: the agent's provider refused %d times in a row for rate limits (last: %s); aot run resumes the loop later", e.rate.inRow, dag.OneLine(ae.Reason, 200)))
		return
	}
	if _, running := e.busy[t.atom]; !running && e.ix.Ready(t.atom) {
		e.markReady(t.atom)
	}
}

// rateCleared notes an answer without a rate limit: the count in a row
// restarts, and the cap on agents rises by one until it is gone.
func (e *engine) rateCleared() {
	e.rate.inRow = 0
	if e.rate.cap > 0 {
		e.rate.cap++
		if e.rate.cap >= e.parallel {
			e.rate.cap = 0
		}
	}
}
