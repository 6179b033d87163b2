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

// attemptUsage is what an attempt cost, from its answer or its error.
func attemptUsage(res agent.Result, err error) agent.Usage {
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
	if err != nil {
		var ae *agent.AttemptError
		if errors.As(err, &ae) {
			u = ae.Usage
		} else {
			u = agent.Usage{}
		}
	}
	e.addKnown(u)
}

func (e *engine) addKnown(u agent.Usage) {
	if !u.Known {
		e.unknown++
	}
	if u.Refused != "" {
		// Numbers no budget can use: said and journaled, never summed.
		e.event(journal.Event{Type: journal.UsageRefused, Reason: u.Refused, Data: map[string]any{"refused": strings.Split(u.Refused, "; ")}})
		e.say("usage reported by an agent was refused: %s", dag.OneLine(u.Refused, 200))
	}
	u.Refused = ""
	e.usage = e.usage.Plus(u)
	e.usage.Known = false
}

// usageFields writes an attempt's usage into its journal event.
func (e *engine) usageFields(ev *journal.Event, r taskResult) {
	u := attemptUsage(r.res, r.err)
	ev.Tokens = u.Tokens()
	ev.CostUSD = agent.AddCost(0, u.CostUSD)
	if !u.Known {
		ev.Data = map[string]any{"usage_unknown": true}
		return
	}
	if ev.Tokens > 0 {
		ev.Data = map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens}
	}
}

// checkpointData is what a checkpoint carries: the loop's usage so far and
// the process trees of the attempts in flight.
func (e *engine) checkpointData() map[string]any {
	d := map[string]any{
		"input_tokens":  e.usage.InputTokens,
		"output_tokens": e.usage.OutputTokens,
		"cost_usd":      e.usage.CostUSD,
	}
	if e.unknown > 0 {
		d["usage_unknown"] = e.unknown
	}
	if trees := e.liveTrees(); len(trees) > 0 {
		d["processes"] = trees
	}
	return d
}

// loadUsage sets the loop's totals from the journal: the last checkpoint's
// totals plus every finished attempt after it, summed as the engine sums
// them (saturating; a negative or non-finite number counts as nothing). A
// journal written before checkpoints carried totals is summed whole.
func (e *engine) loadUsage(cp *journal.Event, after []journal.Event) error {
	if cp != nil {
		if _, ok := cp.Data["input_tokens"]; !ok {
			// An older journal: no totals in its checkpoints.
			all, err := journal.Read(journal.PathFor(e.opts.StateFile))
			if err != nil {
				return fmt.Errorf("read the journal: %w", err)
			}
			cp, after = nil, all
		}
	}
	if cp != nil {
		e.usage = agent.Usage{
			InputTokens:  agent.TokensOf(num(cp.Data["input_tokens"])),
			OutputTokens: agent.TokensOf(num(cp.Data["output_tokens"])),
			CostUSD:      agent.AddCost(0, num(cp.Data["cost_usd"])),
		}
		e.unknown = int(agent.TokensOf(num(cp.Data["usage_unknown"])))
	}
	for _, ev := range after {
		if ev.Type != journal.AtomFinish || ev.Reason == replayedReason {
			continue
		}
		if unknown, _ := ev.Data["usage_unknown"].(bool); unknown {
			e.unknown++
		}
		u := agent.Usage{
			InputTokens:  agent.TokensOf(num(ev.Data["input_tokens"])),
			OutputTokens: agent.TokensOf(num(ev.Data["output_tokens"])),
			CostUSD:      ev.CostUSD,
		}
		if u.Tokens() == 0 {
			u.InputTokens = ev.Tokens // only the total was journaled
		}
		e.usage = e.usage.Plus(u)
	}
	return nil
}

// num is a journaled number (float64 once decoded), 0 when it is not one.
func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	return 0
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
	if d := e.wallTime(); d > 0 && at.After(e.start.Add(d)) {
		stop(" until " + at.Format(time.RFC3339) + ", after this run's max_wall_time; aot run after that resumes it")
		return
	}
	if at.After(e.quotaUntil) {
		e.quotaUntil = at
		e.event(journal.Event{Type: journal.QuotaWait, Atom: atom, Reason: "the agent's usage limit resets at " + at.Format(time.RFC3339), Data: map[string]any{"until": at.Format(time.RFC3339)}})
		e.say("usage limit: waiting until %s, then the loop goes on (aot stop ends it now)", at.Local().Format(time.TimeOnly))
		e.dirty = true
	}
	if _, running := e.busy[atom]; !running && e.ix.Ready(atom) {
		e.markReady(atom)
	}
}

// quotaResumed notes the end of a quota wait.
func (e *engine) quotaResumed() {
	if e.quotaUntil.IsZero() || e.now().Before(e.quotaUntil) {
		return
	}
	e.event(journal.Event{Type: journal.QuotaResume, Reason: "the agent's usage limit has reset"})
	e.say("usage limit reset: going on")
	e.quotaUntil = time.Time{}
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
