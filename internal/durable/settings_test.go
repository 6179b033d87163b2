package durable

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// The run's settings reach the activities: the attempts get the run's
// agent timeout, the verification its check timeout, and the outcome is
// the whole one a local run reports.
func TestWorkflowHandsTheRunsSettingsToItsActivities(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	var checkTimeouts, bounds []time.Duration
	r.env.OnActivity(VerifyActivity, mock.Anything, mock.Anything).Return(func(ctx context.Context, in VerifyInput) (VerifyResult, error) {
		checkTimeouts = append(checkTimeouts, in.CheckTimeout)
		bounds = append(bounds, activity.GetInfo(ctx).StartToCloseTimeout)
		return w.verify(ctx, in)
	})
	in := input(loopState(state.Constraints{}, []state.Atom{atom("A"), atom("B", "A")}, nil))
	in.Settings = engine.Settings{AgentTimeout: 3 * time.Minute, CheckTimeout: 7 * time.Second, MaxParallel: 1}
	out := r.execute(t, in)
	wantReason(t, out, engine.Completed)
	if len(checkTimeouts) == 0 {
		t.Fatal("nothing was verified")
	}
	for i, ct := range checkTimeouts {
		if ct != 7*time.Second {
			t.Errorf("a verification ran with check timeout %s, want the run's 7s", ct)
		}
		// The verification may take the agent's time (a judge) and its
		// one check's.
		if want := 3*time.Minute + attemptMargin + 7*time.Second; bounds[i] != want {
			t.Errorf("a verification was bounded by %s, want %s", bounds[i], want)
		}
	}
	for _, a := range w.attempts {
		if a.Timeout != 3*time.Minute {
			t.Errorf("attempt %s#%d ran with timeout %s, want the run's 3m", a.Task.Atom.ID, a.Task.Attempt, a.Timeout)
		}
	}
	if out.Run == nil || out.Run.Resolved != 2 || out.Run.Unresolved != 0 || out.Run.Iterations == 0 || out.Run.Elapsed == "" {
		t.Errorf("the outcome is not a run's whole outcome: %+v", out.Run)
	}
}

// aot run --engine temporal --no-wait stops at a usage limit even when the
// agent said when its quota resets, as a local run does.
func TestWorkflowNoWaitStopsAtAUsageLimitWithAResetTime(t *testing.T) {
	w := newWorld()
	w.passed = false // the base case does not pass: the loop stops on the limit
	r := newRun(t, w)
	reset := r.env.Now().Add(3 * time.Hour).Truncate(time.Second)
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		return AttemptResult{Result: agent.Result{UsageLimit: true, RetryAt: reset.Format(time.RFC3339)}}, nil
	}
	in := input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil))
	in.NoWait = true
	out := r.execute(t, in)
	wantReason(t, out, engine.UsageLimit)
	if len(w.attempts) != 1 || !r.env.Now().Before(reset) {
		t.Errorf("%d attempts, ended at %s: want one attempt and no wait for the reset at %s", len(w.attempts), r.env.Now(), reset)
	}
}
