package ccw

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestBuildGolden(t *testing.T) {
	m, s, evs := fixture()
	got, err := json.MarshalIndent(Build(m, s, evs, false), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "loop.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("Loop JSON differs from %s (-want +got):\n%s", golden, diff)
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	m, s, evs := fixture()
	a, _ := json.Marshal(Build(m, s, evs, false))
	for range 5 {
		b, _ := json.Marshal(Build(m, s, evs, false))
		if string(a) != string(b) {
			t.Fatal("two builds of the same inputs differ")
		}
	}
}

func TestStatusMapping(t *testing.T) {
	stop := func(reason, msg string) journal.Event {
		return journal.Event{Time: at(100), Type: journal.Stop, Reason: reason, Data: map[string]any{"message": msg}}
	}
	tests := []struct {
		name        string
		control     string
		stopReason  *string
		paused      bool
		stop        *journal.Event
		want        string
		wantFailure string
		wantEnded   bool
	}{
		{name: "pending is created", control: state.ControlPending, want: StatusCreated},
		{name: "pending and paused is still created", control: state.ControlPending, paused: true, want: StatusCreated},
		{name: "running", control: state.ControlRunning, want: StatusRunning},
		{name: "running and paused", control: state.ControlRunning, paused: true, want: StatusPaused},
		{name: "completed", control: state.ControlCompleted, stop: &journal.Event{Time: at(100), Type: journal.Stop, Reason: "completed"}, want: StatusCompleted, wantEnded: true},
		{name: "manual stop is user_exit", control: state.ControlStopped, stopReason: strp("manual stop: aot stop"), stop: ptr(stop("manual_stop", "manual stop: aot stop")), want: StatusUserExit, wantEnded: true},
		{name: "manual stop known only from the journal", control: state.ControlStopped, stop: ptr(stop("manual_stop", "")), want: StatusUserExit, wantEnded: true},
		{name: "max_iterations is failed with its reason", control: state.ControlStopped, stopReason: strp("max_iterations: 10 of 10 iterations done"), stop: ptr(stop("max_iterations", "max_iterations: 10 of 10 iterations done")),
			want: StatusFailed, wantFailure: "max_iterations: 10 of 10 iterations done", wantEnded: true},
		{name: "stall", control: state.ControlStopped, stopReason: strp("stall: 5 sweeps in a row without progress"), want: StatusFailed, wantFailure: "stall: 5 sweeps in a row without progress"},
		{name: "stopped with the reason only in the journal", control: state.ControlStopped, stop: ptr(stop("deadlock", "deadlock: A2 waits on A1")), want: StatusFailed, wantFailure: "deadlock: A2 waits on A1", wantEnded: true},
		{name: "stopped with no reason anywhere", control: state.ControlStopped, want: StatusFailed, wantFailure: "stopped (no reason recorded)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := state.New(state.Objective{Goal: "g"}, nil, "p")
			s.Control.Status, s.Control.StopReason = tt.control, tt.stopReason
			evs := []journal.Event{{Time: at(0), Type: journal.RunStart}}
			if tt.stop != nil {
				evs = append(evs, *tt.stop)
			}
			l := Build(Meta{ID: "loop-v2-20260122-abc123"}, s, evs, tt.paused)
			if l.Status != tt.want || l.FailureReason != tt.wantFailure {
				t.Errorf("status %q, failure %q; want %q, %q", l.Status, l.FailureReason, tt.want, tt.wantFailure)
			}
			if ended := l.CompletedAt != nil; ended != tt.wantEnded {
				t.Errorf("completed_at set %t, want %t", ended, tt.wantEnded)
			}
			if (l.SkillState.Summary != nil) != (l.Status == StatusCompleted || l.Status == StatusFailed || l.Status == StatusUserExit) {
				t.Errorf("summary %v for status %s", l.SkillState.Summary, l.Status)
			}
		})
	}
	if got := Build(Meta{ID: "loop-v2-20260122-abc123"}, nil, nil, true); got.Status != StatusCreated {
		t.Errorf("no state: status %q, want created", got.Status)
	}
}

func ptr[T any](v T) *T { return &v }

func TestTaskMapping(t *testing.T) {
	m, s, evs := fixture()
	l := Build(m, s, evs, false)
	type row struct {
		Status   string
		Tool     string
		Mode     string
		Files    int
		Attempts int
		Created  bool
		Done     bool
	}
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	got := map[string]row{}
	for _, tk := range l.SkillState.Develop.Tasks {
		got[tk.ID] = row{tk.Status, deref(tk.Tool), deref(tk.Mode), len(tk.FilesChanged), tk.Attempts, tk.CreatedAt != nil, tk.CompletedAt != nil}
	}
	want := map[string]row{
		"A1":   {Status: TaskCompleted, Tool: "claude", Mode: "write", Files: 2, Attempts: 1, Done: true},
		"A2a":  {Status: TaskFailed, Tool: "claude", Mode: "write", Attempts: 1},                          // a failed OR choice
		"A2b":  {Status: TaskCompleted, Tool: "claude", Mode: "write", Files: 1, Attempts: 2, Done: true}, // probe, then worker
		"A3":   {Status: TaskPending, Tool: "claude", Mode: "analysis", Attempts: 1},                      // its planner's run
		"A3.1": {Status: TaskCompleted, Tool: "claude", Mode: "write", Files: 1, Attempts: 1, Created: true, Done: true},
		"A3.2": {Status: TaskInProgress, Tool: "claude", Mode: "write", Attempts: 1, Created: true},
		"A4":   {Status: TaskFailed, Tool: "claude", Mode: "write", Attempts: 2}, // parked
		"A5":   {Status: TaskPending},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	d := l.SkillState.Develop
	// A3 is decomposed (its children count), A2a is not the OR group's unit.
	if d.Total != 6 || d.Completed != 3 || deref(d.CurrentTask) != "A3.2" {
		t.Errorf("develop total %d completed %d current %q; want 6, 3, A3.2", d.Total, d.Completed, deref(d.CurrentTask))
	}
}

func TestHypotheses(t *testing.T) {
	m, s, evs := fixture()
	d := Build(m, s, evs, false).SkillState.Debug
	if d.HypothesesCount != 2 || d.Iteration != 1 {
		t.Fatalf("hypotheses %d, iteration %d; want 2, 1", d.HypothesesCount, d.Iteration)
	}
	a, b := d.Hypotheses[0], d.Hypotheses[1]
	if a.ID != "A2a" || a.Status != HypothesisRejected || a.Likelihood != 1 || *a.VerdictReason != "crash: exit status 2" || a.Evidence.Backtrack == nil || a.Evidence.Backtrack.To != "A2b" {
		t.Errorf("rejected choice: %+v", a)
	}
	if b.ID != "A2b" || b.Status != HypothesisConfirmed || *b.VerdictReason != "resolved: JWT sessions" || len(b.Evidence.Runs) != 2 {
		t.Errorf("confirmed choice: %+v", b)
	}
	if d.ConfirmedHypothesis == nil || *d.ConfirmedHypothesis != "A2b" || d.ActiveBug != nil {
		t.Errorf("confirmed %v, active bug %v; want A2b and none (the group resolved)", d.ConfirmedHypothesis, d.ActiveBug)
	}
	// Before A2b resolved, the backtrack is the active bug and A2b pending.
	s.Atom("A2b").Status = state.StatusInProgress
	d = Build(m, s, evs, false).SkillState.Debug
	if d.ActiveBug == nil || *d.ActiveBug != "sessions: A2a failed" || d.Hypotheses[1].Status != HypothesisPending || d.Hypotheses[1].VerdictReason != nil {
		t.Errorf("during the backtrack: active bug %v, second %+v", d.ActiveBug, d.Hypotheses[1])
	}
}

func TestValidateFromEvidence(t *testing.T) {
	m, s, evs := fixture()
	v := Build(m, s, evs, false).SkillState.Validate
	if v.Passed || v.Runs != 1 || len(v.Checklist) != 2 || v.PassRateBasis != "tests" {
		t.Fatalf("validate: %+v", v)
	}
	if *v.PassRate != 50 || *v.Coverage != 81.2 {
		t.Errorf("pass rate %v coverage %v; want 50 (1 of 2, the skip not counted) and 81.2", *v.PassRate, *v.Coverage)
	}
	if diff := cmp.Diff([]string{"example.com/auth.TestLogout"}, v.FailedTests); diff != "" {
		t.Errorf("failed tests (-want +got):\n%s", diff)
	}
	// With the whole outputs, they are read instead of the evidence.
	v = BuildWith(m, s, evs, false, map[string]string{"tests": "--- PASS: TestA (0.00s)\nok  \tx\t0.1s\tcoverage: 90.0% of statements\n"}).SkillState.Validate
	if len(v.TestResults) != 1 || *v.PassRate != 100 || *v.Coverage != 90 {
		t.Errorf("from outputs: %+v", v)
	}
	// No test in any output: the checklist's items give the pass rate.
	evs[len(evs)-3].Data["checklist"].([]any)[0].(map[string]any)["evidence"] = "Command exited with code 1 (failure)"
	v = Build(m, s, evs, false).SkillState.Validate
	if v.PassRateBasis != "checklist" || *v.PassRate != 50 || v.Coverage != nil {
		t.Errorf("from the checklist: basis %q rate %v coverage %v", v.PassRateBasis, *v.PassRate, v.Coverage)
	}
	// Nothing verified yet: nulls, not zeros.
	v = Build(m, s, evs[:3], false).SkillState.Validate
	if v.PassRate != nil || v.Coverage != nil || v.LastRunAt != nil {
		t.Errorf("before any verification: %+v", v)
	}
}

func TestActions(t *testing.T) {
	m, s, evs := fixture()
	ss := Build(m, s, evs, false).SkillState
	if diff := cmp.Diff([]string{"INIT", "DEVELOP", "DEBUG", "DEVELOP", "VALIDATE", "DEVELOP"}, ss.CompletedActions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if *ss.CurrentAction != "develop" || *ss.LastAction != "DEVELOP" {
		t.Errorf("current %q last %q", *ss.CurrentAction, *ss.LastAction)
	}
	if len(ss.Errors) != 4 { // A4 twice, A2a, the verification
		t.Errorf("errors: %+v", ss.Errors)
	}
}
