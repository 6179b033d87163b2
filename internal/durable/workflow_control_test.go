package durable

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
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
		v, err := r.env.QueryWorkflow(QueryStatus)
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
		v, err := r.env.QueryWorkflow(QueryStatus)
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
	r.env.RegisterDelayedCallback(r.env.CancelWorkflow, 10*time.Minute)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A"), atom("B")}, nil)))
	wantReason(t, out, engine.ManualStop)
	if cancelled != 2 {
		t.Errorf("%d attempts cancelled, want 2", cancelled)
	}
	s, _ := r.final(t)
	if s.Control.Status != state.ControlStopped || s.Atom("A").Status != state.StatusPending {
		t.Errorf("control %+v, A %+v", s.Control, s.Atom("A"))
	}
}

func TestWorkflowProjectsTheState(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	slowAttempts(r, 10*time.Minute, success)
	var queues []string
	r.env.SetOnActivityStartedListener(func(info *activity.Info, ctx context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name == ProjectionActivity {
			queues = append(queues, info.TaskQueue)
		}
	})
	in := input(loopState(state.Constraints{}, []state.Atom{atom("A"), atom("B", "A")}, nil))
	in.ProjectionQueue = "aot-client-1"
	wantReason(t, r.execute(t, in), engine.Completed)
	if len(w.projected) < 3 {
		t.Fatalf("%d projections", len(w.projected))
	}
	last := w.projected[len(w.projected)-1]
	s, err := state.Parse(last.State)
	if err != nil || !last.Done || s.Control.Status != state.ControlCompleted {
		t.Errorf("the last projection: done %t, state %v (%v)", last.Done, s, err)
	}
	for _, q := range queues {
		if q != "aot-client-1" {
			t.Errorf("projection on task queue %q", q)
		}
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
		if v, err := r.env.QueryWorkflow(QueryStatus); err == nil {
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
