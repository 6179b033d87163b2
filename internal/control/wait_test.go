package control_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/control"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
)

// stuckEngine is a loop whose engine holds the run lock and never acts on
// a request: what a wedged or very busy engine looks like to a client.
func stuckEngine(t *testing.T) string {
	t.Helper()
	sf := filepath.Join(t.TempDir(), ".claude", "aot-loop-state.md")
	s := state.New(state.Objective{Goal: "g", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "done",
		BaseCase:    &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "true"}},
		Constraints: state.Constraints{MaxIterations: 10, MaxParallelAgents: 1, MaxStallCount: 3}},
		[]state.Atom{{ID: "A", Description: "a", Status: state.StatusPending}}, "g")
	if err := state.NewStore(sf).Create(s, false); err != nil {
		t.Fatal(err)
	}
	l, err := runlock.Acquire(sf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release() })
	return sf
}

// cancelSoon is a context cancelled 100ms from now.
func cancelSoon(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	time.AfterFunc(100*time.Millisecond, cancel)
	return ctx
}

// pendingRequests are the request files the engine has not taken.
func pendingRequests(t *testing.T, sf string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(journal.DirFor(sf), "requests", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A cancelled context ends every wait of the local controls at once, with
// context.Canceled: a dropped API client or a Ctrl-C does not hold on for
// the engine. What is left is as documented: a stop request stays in the
// state file (the engine still acts on it); a pause, resume or redirect
// the engine has not taken is withdrawn, the state file untouched.
func TestACancelledContextEndsALocalWaitAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(ctx context.Context, c control.Controller) error
		stop bool
	}{
		{"stop", func(ctx context.Context, c control.Controller) error { _, err := c.Stop(ctx, "enough"); return err }, true},
		{"pause", func(ctx context.Context, c control.Controller) error { return c.Pause(ctx, true, "look") }, false},
		{"resume", func(ctx context.Context, c control.Controller) error { return c.Resume(ctx, "go on") }, false},
		{"redirect", func(ctx context.Context, c control.Controller) error {
			n := 4
			_, err := c.Redirect(ctx, engine.Change{Reason: "fewer", MaxIterations: &n})
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sf := stuckEngine(t)
			before, err := os.ReadFile(sf)
			if err != nil {
				t.Fatal(err)
			}
			c := control.For(context.Background(), sf, nil, time.Now)
			if c.Kind() != control.Local {
				t.Fatalf("a loop without a Temporal marker got the %s controls", c.Kind())
			}
			start := time.Now()
			err = tc.do(cancelSoon(t), c)
			took := time.Since(start)
			if !errors.Is(err, context.Canceled) || took > time.Second {
				t.Fatalf("%s: %v after %s, want context.Canceled within a second", tc.name, err, took)
			}
			after, err := os.ReadFile(sf)
			if err != nil {
				t.Fatal(err)
			}
			if tc.stop {
				s, err := state.NewStore(sf).Read()
				if err != nil || !s.Control.StopRequested || s.Control.StopReason == nil || *s.Control.StopReason != "enough" {
					t.Errorf("after a cancelled stop the state file says stop_requested %v (%v), want the request kept", s.Control.StopRequested, err)
				}
				return
			}
			if !bytes.Equal(before, after) {
				t.Errorf("a cancelled %s changed the state file", tc.name)
			}
			if left := pendingRequests(t, sf); len(left) != 0 {
				t.Errorf("a cancelled %s left its request for the engine: %v", tc.name, left)
			}
		})
	}
}

// An ended context is said before anything is asked of the engine.
func TestAnEndedContextAsksTheEngineNothing(t *testing.T) {
	sf := stuckEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := control.For(ctx, sf, nil, time.Now).Pause(ctx, false, "late"); !errors.Is(err, context.Canceled) {
		t.Fatalf("pause with an ended context: %v", err)
	}
	if _, err := os.Stat(filepath.Join(journal.DirFor(sf), "requests")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a request was written with an ended context: %v", err)
	}
}

// deafWorkflow is a running workflow that takes every signal and a cancel
// and never acts on them: its Sync answers the same, forever.
type deafWorkflow struct{ paused bool }

func (d deafWorkflow) Sync(ctx context.Context, stateFile string) (control.Workflow, error) {
	return control.Workflow{ID: "aot-deaf", Running: true, Paused: d.paused, Status: "Running"}, nil
}
func (deafWorkflow) Pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	return nil
}
func (deafWorkflow) Resume(ctx context.Context, stateFile, reason string) error { return nil }
func (deafWorkflow) Stop(ctx context.Context, stateFile, reason string) (control.Workflow, error) {
	return control.Workflow{}, nil
}
func (deafWorkflow) Redirect(ctx context.Context, stateFile string, c engine.Change) error {
	<-ctx.Done() // an Update waits for the workflow's answer
	return ctx.Err()
}

// The Temporal controls wait for the workflow to act by asking it; a
// cancelled context ends that wait at once too.
func TestACancelledContextEndsAWorkflowWaitAtOnce(t *testing.T) {
	sf := stuckEngine(t)
	if err := os.WriteFile(journal.TemporalMarker(sf), []byte(`{"workflow_id": "aot-deaf"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		paused bool
		do     func(ctx context.Context, c control.Controller) error
	}{
		{"stop", false, func(ctx context.Context, c control.Controller) error { _, err := c.Stop(ctx, "enough"); return err }},
		{"pause", false, func(ctx context.Context, c control.Controller) error { return c.Pause(ctx, false, "look") }},
		{"resume", true, func(ctx context.Context, c control.Controller) error { return c.Resume(ctx, "go on") }},
		{"redirect", false, func(ctx context.Context, c control.Controller) error {
			_, err := c.Redirect(ctx, engine.Change{Reason: "r", RemoveAtoms: []string{"A"}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := control.For(context.Background(), sf, deafWorkflow{paused: tc.paused}, time.Now)
			if c.Kind() != control.Temporal {
				t.Fatalf("a loop whose workflow runs got the %s controls", c.Kind())
			}
			start := time.Now()
			err := tc.do(cancelSoon(t), c)
			if took := time.Since(start); !errors.Is(err, context.Canceled) || took > time.Second {
				t.Fatalf("%s: %v after %s, want context.Canceled within a second", tc.name, err, took)
			}
		})
	}
}
