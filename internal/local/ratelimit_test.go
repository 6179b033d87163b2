package local

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

func TestRateLimitsWaitWithFewerAgentsAndAreNotCharged(t *testing.T) {
	ids := []string{"A", "B", "C", "D"}
	path, _, _ := scriptProject(t, ids, "true", func(s *state.State) {
		s.Objective.Constraints.MaxAttemptsPerAtom = 1 // a charged rate limit would park the atom
	})
	var mu sync.Mutex
	limited := map[string]int{}
	running, maxAfter := 0, 0
	seenLimit := false
	ag := &funcAgent{fn: func(ctx context.Context, tk agent.Task) (agent.Result, error) {
		mu.Lock()
		running++
		if seenLimit && running > maxAfter {
			maxAfter = running
		}
		n := limited[tk.Atom.ID]
		if tk.Role == agent.Worker && n < 2 {
			limited[tk.Atom.ID]++
		}
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		running--
		if tk.Role == agent.Worker && n < 2 {
			seenLimit = true
			mu.Unlock()
			return agent.Result{}, &agent.AttemptError{Kind: agent.KindRateLimit, Reason: "HTTP 429: slow down", RetryAfter: 30 * time.Millisecond}
		}
		mu.Unlock()
		return agent.Result{Success: true, Feasible: true, Summary: "done"}, nil
	}}
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 4 })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	s := read(t, path)
	for _, a := range s.Atoms {
		if a.Status != state.StatusResolved {
			t.Errorf("%s is %s", a.ID, a.Status)
		}
	}
	rl := events(t, path, journal.RateLimit)
	if len(rl) != 8 {
		t.Fatalf("rate_limit events = %d, want 8", len(rl))
	}
	for _, ev := range rl {
		if ev.DurationMS != 30 || !strings.Contains(ev.Reason, "429") {
			t.Fatalf("rate_limit event = %+v (want the provider's retry-after, 30ms)", ev)
		}
	}
	if mp := journal.DataOf[journal.RateLimitData](rl[0]).MaxParallel; mp != 2 {
		t.Fatalf("first rate limit lowered parallelism to %v, want 2", mp)
	}
	if maxAfter > 2 {
		t.Fatalf("%d agents ran at once after a rate limit, want at most 2", maxAfter)
	}
	for _, ev := range events(t, path, journal.AtomFinish) {
		if ev.OK != nil && !*ev.OK {
			t.Fatalf("a rate limit was journaled as a failed attempt: %+v", ev)
		}
	}
}

func TestEndlessRateLimitsStopTheLoop(t *testing.T) {
	path, _, _ := scriptProject(t, []string{"A"}, "false", nil)
	ag := &funcAgent{fn: func(ctx context.Context, tk agent.Task) (agent.Result, error) {
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindRateLimit, Reason: "HTTP 529: overloaded", RetryAfter: time.Millisecond}
	}}
	out := runEngine(t, path, ag, nil)
	if out.Reason != engine.UsageLimit || !strings.Contains(out.Message, "12 times in a row") || !strings.Contains(out.Message, "529") {
		t.Fatalf("outcome = %+v", out)
	}
	if a := read(t, path).Atom("A"); a.Attempts != 0 || a.Status != state.StatusPending {
		t.Fatalf("A = %+v (rate limits must not be charged)", a)
	}
}

func TestToolCallsShowAsProgressAndFailuresCarryTheirKind(t *testing.T) {
	path, _, _ := scriptProject(t, []string{"A3"}, "true", nil)
	ag := &funcAgent{fn: func(ctx context.Context, tk agent.Task) (agent.Result, error) {
		agent.ActivityFunc(ctx)(agent.Activity{Tool: "Bash", Detail: "go test ./...\nsecond line"})
		if tk.Attempt == 1 {
			return agent.Result{}, &agent.AttemptError{Kind: agent.KindMalformed, Reason: "malformed answer: no JSON"}
		}
		return agent.Result{Success: true, Feasible: true}, nil
	}}
	var progress syncBuffer
	out := runEngine(t, path, ag, func(o *Options) { o.Progress = &progress })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	if !strings.Contains(progress.String(), "] A3 Bash: go test ./... second line\n") {
		t.Fatalf("progress:\n%s", progress.String())
	}
	var kinds []string
	for _, ev := range events(t, path, journal.AtomFinish) {
		if k, _ := ev.Data["kind"].(string); k != "" {
			kinds = append(kinds, k)
		}
	}
	if strings.Join(kinds, ",") != "malformed_answer" {
		t.Fatalf("kinds = %v", kinds)
	}
}
