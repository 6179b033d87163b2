package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// Usage is counted for the whole loop, across runs: every checkpoint in the
// journal carries the totals so far, and a run starts from the last one plus
// what was journaled after it. So max_tokens and max_cost_usd bound the loop,
// not one aot run. An attempt that crashed, timed out or was killed is paid
// for with what the agent reported while it ran (the exec protocol's
// AOT_USAGE_FILE); one that reported nothing is counted as unknown, never as
// zero.

// AttemptUsage is what an attempt cost, from its answer or its error.
func AttemptUsage(res agent.Result, err error) agent.Usage {
	var ae *agent.AttemptError
	if errors.As(err, &ae) {
		return ae.Usage
	}
	if err != nil {
		return agent.Usage{}
	}
	return res.Usage
}

// addUsage adds an attempt's usage to the loop's totals.
func (e *engine) addUsage(u agent.Usage, err error) {
	e.addKnown(AttemptUsage(agent.Result{Usage: u}, err))
}

func (e *engine) addKnown(u agent.Usage) {
	if refused := Tally(&e.book.Usage, &e.book.Unknown, u); refused != "" {
		// Numbers no budget can use: said and journaled, never summed.
		e.event(UsageRefused(refused))
		e.say("usage reported by an agent was refused: %s", dag.OneLine(refused, 200))
	}
}

// Tally adds u to a total and to its count of attempts that reported
// nothing; it returns the numbers it refused to sum ("" when none).
func Tally(total *agent.Usage, unknown *int, u agent.Usage) (refused string) {
	if !u.Known {
		*unknown++
	}
	refused, u.Refused = u.Refused, ""
	*total = total.Plus(u)
	total.Known = false
	return refused
}

// UsageRefused is the event of usage numbers no budget can use.
func UsageRefused(refused string) journal.Event {
	return journal.Event{Reason: refused}.With(journal.UsageRefusedData{Refused: strings.Split(refused, "; ")})
}

// UsageFields writes an attempt's usage into its journal event (an
// atom_finish): the totals on the event, the tokens (or that the agent
// reported none) in the data it returns, which the caller completes.
func UsageFields(ev *journal.Event, res agent.Result, err error) journal.AtomFinishData {
	u := AttemptUsage(res, err)
	ev.Tokens = u.Tokens()
	ev.CostUSD = agent.AddCost(0, u.CostUSD)
	var d journal.AtomFinishData
	switch {
	case !u.Known:
		d.UsageUnknown = true
	case ev.Tokens > 0:
		d.InputTokens, d.OutputTokens = journal.Ref(journal.Count(u.InputTokens)), journal.Ref(journal.Count(u.OutputTokens))
	}
	*ev = ev.With(d)
	return d
}

// usageLimit handles an agent's quota answer: with a reset time the loop
// waits (within max_wall_time) and goes on by itself; without one, or with
// --no-wait, it stops with usage_limit.
func (e *engine) usageLimit(atom string, res agent.Result) {
	stop := func(msg string) {
		e.stopWith(UsageLimit, "usage_limit: the agent reported its provider's usage limit (on "+atom+")"+msg)
	}
	if res.RetryAt == "" {
		stop("; it gave no reset time (retry_at), so the loop stops; aot run resumes it")
		return
	}
	at, err := time.Parse(time.RFC3339, res.RetryAt)
	if err != nil {
		stop(fmt.Sprintf("; its retry_at %q is not an RFC 3339 time", res.RetryAt))
		return
	}
	if e.opts.NoWait {
		stop(" until " + at.Format(time.RFC3339) + " (--no-wait); aot run after that resumes it")
		return
	}
	if d := e.wallTime(); d > 0 && at.After(e.book.Start.Add(d)) {
		stop(" until " + at.Format(time.RFC3339) + ", after this run's max_wall_time; aot run after that resumes it")
		return
	}
	if at.After(e.book.QuotaUntil) {
		e.book.QuotaUntil = at
		e.event(journal.Event{Atom: atom, Reason: "the agent's usage limit resets at " + at.Format(time.RFC3339)}.With(journal.QuotaWaitData{Until: at.Format(time.RFC3339)}))
		e.say("usage limit: waiting until %s, then the loop goes on (aot stop ends it now)", at.Local().Format(time.TimeOnly))
		e.dirty = true
	}
	if _, running := e.busy[atom]; !running && e.ix.Ready(atom) {
		e.markReady(atom)
	}
}

// quotaResumed notes the end of a quota wait.
func (e *engine) quotaResumed() {
	if e.book.QuotaUntil.IsZero() || e.now().Before(e.book.QuotaUntil) {
		return
	}
	e.event(journal.Event{Type: journal.QuotaResume, Reason: "the agent's usage limit has reset"})
	e.say("usage limit reset: going on")
	e.book.QuotaUntil = time.Time{}
}

// wallTime is max_wall_time, 0 when there is none.
func (e *engine) wallTime() time.Duration {
	w := e.s.Objective.Constraints.MaxWallTime
	if w == "" {
		return 0
	}
	d, err := state.ParseDuration(w)
	if err != nil {
		return 0
	}
	return d
}
