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

// slots is how many agents may run at once now.
func (e *engine) slots() int {
	if e.book.RateCap > 0 && e.book.RateCap < e.parallel {
		return e.book.RateCap
	}
	return e.parallel
}

// rateLimited handles a rate-limited attempt of t.
func (e *engine) rateLimited(t *task, ae *agent.AttemptError) {
	e.book.RateInRow++
	wait := ae.RetryAfter
	if wait <= 0 {
		wait = rateFirstWait
		for i := 1; i < e.book.RateInRow && wait < rateMaxWait; i++ {
			wait *= 2
		}
	}
	wait = min(wait, rateMaxWait)
	until := e.now().Add(wait)
	if until.After(e.book.RateUntil) {
		e.book.RateUntil = until
	}
	running := len(e.tasks) + 1 // t was running too
	if c := max(1, min(e.slots(), running)/2); e.book.RateCap == 0 || c < e.book.RateCap {
		e.book.RateCap = c
	}
	e.event(journal.Event{Type: journal.RateLimit, Atom: t.atom, Role: string(t.role), Attempt: t.attempt, Reason: ae.Reason, DurationMS: wait.Milliseconds()}.With(journal.RateLimitData{Until: e.book.RateUntil.Format(time.RFC3339Nano), MaxParallel: e.book.RateCap, InARow: e.book.RateInRow, Kind: string(ae.Kind)}))
	e.say("rate limited (%s on %s): waiting %s, then at most %s at once", dag.OneLine(ae.Reason, 80), t.atom, wait.Round(time.Millisecond), brief.Count(e.book.RateCap, "agent"))
	if e.book.RateInRow >= rateMaxInRow {
		e.stopWith(UsageLimit, fmt.Sprintf("usage_limit: the agent's provider refused %d times in a row for rate limits (last: %s); aot run resumes the loop later", e.book.RateInRow, dag.OneLine(ae.Reason, 200)))
		return
	}
	if _, running := e.busy[t.atom]; !running && e.ix.Ready(t.atom) {
		e.markReady(t.atom)
	}
}

// rateCleared notes an answer without a rate limit: the count in a row
// restarts, and the cap on agents rises by one until it is gone.
func (e *engine) rateCleared() {
	e.book.RateInRow = 0
	if e.book.RateCap > 0 {
		e.book.RateCap++
		if e.book.RateCap >= e.parallel {
			e.book.RateCap = 0
		}
	}
}
