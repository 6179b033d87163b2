package durable

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// A person's controls of a running loop: pause and resume, redirect, stop,
// the status query and the projection.

func TestWorkflowPauseResume(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	slowAttempts(r, 10*time.Minute, success)
	starts := map[string]time.Time{}
	r.env.SetOnActivityStartedListener(func(info *activity.Info, ctx context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name == AttemptActivity {
			var in AttemptInput
			_ = args.Get(&in)
			starts[in.Task.Atom.ID] = r.env.Now()
		}
	})
	t0 := r.env.Now()
	var paused Status
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(SignalPause, PauseRequest{Reason: "lunch"}) }, 5*time.Minute)
	r.env.RegisterDelayedCallback(func() {
		v, err := r.env.QueryWorkflow(QueryStatus, 0)
		if err == nil {
			_ = v.Get(&paused)
		}
	}, 30*time.Minute)
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(SignalResume, ResumeRequest{}) }, time.Hour)
	out := r.execute(t, input(loopState(state.Constraints{MaxWallTime: "50m"}, []state.Atom{atom("A"), atom("B", "A")}, nil)))
	wantReason(t, out, engine.Completed)
	// A ran through the pause; B waited for the resume. The paused hour is
	// not charged to max_wall_time.
	if got := starts["B"].Sub(t0); got < time.Hour {
		t.Errorf("B started %s after the start, before the resume", got)
	}
	if !paused.Paused || len(paused.Running) != 0 {
		t.Errorf("status while paused: paused %t, running %v", paused.Paused, paused.Running)
	}
}

func TestWorkflowPauseKill(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	slowAttempts(r, 10*time.Minute, success)
	cancelled := 0
	r.env.SetOnActivityCanceledListener(func(info *activity.Info) { cancelled++ })
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(SignalPause, PauseRequest{Kill: true}) }, 5*time.Minute)
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(SignalResume, nil) }, time.Hour)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Completed)
	if diff := cmp.Diff([]string{"A#1", "A#1"}, w.tried()); diff != "" || cancelled != 1 {
		t.Errorf("attempts (-want +got):\n%s; %d cancelled", diff, cancelled)
	}
	s, _ := r.final(t)
	if a := s.Atom("A"); a.Attempts != 0 {
		t.Errorf("a killed attempt was charged: %+v", a)
	}
}

func TestWorkflowRedirectAddsAnAtom(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	slowAttempts(r, 10*time.Minute, success)
	var accepted bool
	var done error = errors.New("not completed")
	r.env.RegisterDelayedCallback(func() {
		r.env.UpdateWorkflow(UpdateRedirect, "u1", &testsuite.TestUpdateCallback{
			OnAccept:   func() { accepted = true },
			OnReject:   func(err error) { t.Errorf("refused: %v", err) },
			OnComplete: func(_ any, err error) { done = err },
		}, engine.Change{Reason: "one more", AddAtoms: []state.Atom{atom("D", "A")}})
	}, 5*time.Minute)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Completed)
	if !accepted || done != nil {
		t.Errorf("accepted %t, completed with %v", accepted, done)
	}
	if diff := cmp.Diff([]string{"A#1", "D#1"}, w.tried()); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	s, _ := r.final(t)
	if len(s.Corrections) != 1 || s.Corrections[0].Type != "dag_adjustment" {
		t.Errorf("corrections: %+v", s.Corrections)
	}
}

func TestWorkflowRedirectRefused(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	slowAttempts(r, 10*time.Minute, success)
	var refused error
	var before, after []byte
	query := func(into *[]byte) {
		v, err := r.env.QueryWorkflow(QueryStatus, 0)
		var st Status
		if err == nil && v.Get(&st) == nil {
			*into = st.State
		}
	}
	r.env.RegisterDelayedCallback(func() {
		query(&before)
		r.env.UpdateWorkflow(UpdateRedirect, "u1", &testsuite.TestUpdateCallback{
			OnAccept:   func() { t.Error("accepted") },
			OnReject:   func(err error) { refused = err },
			OnComplete: func(any, error) {},
		}, engine.Change{Reason: "bad", AddAtoms: []state.Atom{atom("D", "nowhere")}})
		query(&after)
	}, 5*time.Minute)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Completed)
	if refused == nil || !strings.Contains(refused.Error(), "nowhere") {
		t.Errorf("refusal: %v", refused)
	}
	if len(before) == 0 || string(before) != string(after) {
		t.Errorf("the state changed on a refused redirect:\n%s\n---\n%s", before, after)
	}
}

func TestWorkflowCancelIsAManualStop(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	slowAttempts(r, time.Hour, success)
	cancelled := 0
	r.env.SetOnActivityCanceledListener(func(info *activity.Info) { cancelled++ })
	r.env.RegisterDelayedCallback(func() {
		// As aot stop --reason R does it: the reason, then the cancellation.
		r.env.SignalWorkflow(SignalStop, StopRequest{Reason: "wrong approach"})
		r.env.CancelWorkflow()
	}, 10*time.Minute)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A"), atom("B")}, nil)))
	wantReason(t, out, engine.ManualStop)
	if out.Message != "manual stop: wrong approach" {
		t.Errorf("message %q", out.Message)
	}
	if cancelled != 2 {
		t.Errorf("%d attempts cancelled, want 2", cancelled)
	}
	// A stop leaves no atom's branch on the remote: the workflow deletes
	// every branch under its own prefix but the integration branch.
	want := []CleanInput{{Repo: "git@example.com:r.git", Prefix: "aot/loop-1/", Keep: "aot/loop-1"}}
	if len(w.cleaned) != 1 || w.cleaned[0] != want[0] {
		t.Errorf("branch cleanups %+v, want %+v", w.cleaned, want)
	}
	s, _ := r.final(t)
	if s.Control.Status != state.ControlStopped || s.Atom("A").Status != state.StatusPending || s.Control.StopReason == nil || *s.Control.StopReason != out.Message {
		t.Errorf("control %+v, A %+v", s.Control, s.Atom("A"))
	}
}

func TestWorkflowStatusCarriesTheJournal(t *testing.T) {
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Atom.ID == "A" && in.Task.Attempt == 1 {
			return failure("not yet"), nil
		}
		return success(in), nil
	}
	r := newRun(t, w)
	wantReason(t, r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil))), engine.Completed)
	query := func(since int) Status { return queryStatus(t, r, since, 0) }
	st := query(0)
	var got []string
	for _, ev := range st.Events {
		if ev.Time.IsZero() {
			t.Errorf("%s has no time", ev.Type)
		}
		got = append(got, ev.Type+" "+ev.Role+" "+ev.Atom)
	}
	// The engine's own events, as its journal has them: A fails, the probe
	// looks, A's second attempt resolves it, the base case passes.
	want := []string{"run_start  ", "atom_start worker A", "atom_finish worker A", "backoff  A", "iteration  ", "stall  ",
		"atom_start probe A", "atom_finish probe A", "atom_start worker A", "merge  A", "atom_finish worker A", "iteration  ", "verify  ", "stop  "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if st.EventSeq != len(st.Events) {
		t.Errorf("event_seq %d for %d events", st.EventSeq, len(st.Events))
	}
	if later := query(st.EventSeq - 2); len(later.Events) != 2 || later.Events[1].Type != "stop" {
		t.Errorf("the events after %d: %+v", st.EventSeq-2, later.Events)
	}
	if none := query(st.EventSeq); len(none.Events) != 0 {
		t.Errorf("events after the last: %+v", none.Events)
	}
}

func TestWorkflowRedirectCancelsWhatItInvalidates(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	slowAttempts(r, time.Hour, success)
	var cancelled []string
	r.env.SetOnActivityCanceledListener(func(info *activity.Info) { cancelled = append(cancelled, info.ActivityID) })
	var running []Running
	r.env.RegisterDelayedCallback(func() {
		if v, err := r.env.QueryWorkflow(QueryStatus, 0); err == nil {
			var st Status
			_ = v.Get(&st)
			running = st.Running
		}
		r.env.UpdateWorkflow(UpdateRedirect, "u1", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("refused: %v", err) }, OnComplete: func(any, error) {},
		}, engine.Change{Reason: "A is not needed", RemoveAtoms: []string{"A"}})
	}, 5*time.Minute)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A"), atom("B")}, nil)))
	wantReason(t, out, engine.Completed)
	if len(running) != 2 || running[0].Atom != "A" || running[0].Attempt != 1 || running[1].Atom != "B" {
		t.Errorf("running before the redirect: %+v", running)
	}
	// B's attempt went on; A's was cancelled.
	if len(cancelled) != 1 || fmt.Sprint(w.merges) != "[B]" {
		t.Errorf("cancelled %v, merges %v", cancelled, w.merges)
	}
}

// A redirect that arrives while the Core waits for a verification is taken
// after it, as a local engine takes redirects between its steps: here the
// verification passes, the loop completes, and the redirect is refused
// for it, instead of changing the graph under a decision already made.
func TestWorkflowRedirectWaitsForTheVerificationUnderWay(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	r.env.OnActivity(VerifyActivity, mock.Anything, mock.Anything).After(10*time.Minute).Return(VerifyResult{Report: verify.Report{Passed: true}}, nil)
	var accepted bool
	var done error
	r.env.RegisterDelayedCallback(func() {
		r.env.UpdateWorkflow(UpdateRedirect, "u1", &testsuite.TestUpdateCallback{
			OnAccept:   func() { accepted = true },
			OnReject:   func(err error) { done = err },
			OnComplete: func(_ any, err error) { done = err },
		}, engine.Change{Reason: "one more", AddAtoms: []state.Atom{atom("D", "A")}})
	}, 5*time.Minute)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Completed)
	if done == nil || !strings.Contains(done.Error(), "ended") {
		t.Errorf("accepted %t, the redirect ended with %v", accepted, done)
	}
	s, _ := r.final(t)
	if s.Atom("D") != nil || s.Control.Status != state.ControlCompleted {
		t.Errorf("the completed loop changed: D %+v, control %+v", s.Atom("D"), s.Control)
	}
}
