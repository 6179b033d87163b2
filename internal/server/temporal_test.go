package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/server"
	"github.com/aot-loop/aot/internal/state"
)

// fakeWorkflows plays the Temporal workflows of the loops marked as on
// Temporal: each holds a state it projects into the loop's state file when
// asked, and the controls change it as a workflow would.
type fakeWorkflows struct {
	mu    sync.Mutex
	loops map[string]*fakeWorkflow // by state file
	calls []string                 // every control, "op state-file details"
}

type fakeWorkflow struct {
	wf    server.Workflow
	st    *state.State
	syncs int
	err   error // what Sync answers, when set
}

func (f *fakeWorkflows) get(stateFile string) (*fakeWorkflow, error) {
	w := f.loops[stateFile]
	if w == nil {
		return nil, fmt.Errorf("no workflow for %s", stateFile)
	}
	return w, nil
}

func (f *fakeWorkflows) Sync(ctx context.Context, stateFile string) (server.Workflow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, err := f.get(stateFile)
	if err != nil {
		return server.Workflow{}, err
	}
	w.syncs++
	if w.err != nil {
		return server.Workflow{}, w.err
	}
	next := state.Clone(w.st)
	if _, err := state.NewStore(stateFile).Update(func(s *state.State) error { state.CopyInto(s, next); return nil }); err != nil {
		return server.Workflow{}, err
	}
	return w.wf, nil
}

func (f *fakeWorkflows) control(stateFile, what string, fn func(w *fakeWorkflow) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, what+" "+stateFile)
	w, err := f.get(stateFile)
	if err != nil {
		return err
	}
	return fn(w)
}

func (f *fakeWorkflows) Pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	return f.control(stateFile, fmt.Sprintf("pause kill=%v %q", kill, reason), func(w *fakeWorkflow) error {
		w.wf.Paused = true
		return nil
	})
}

func (f *fakeWorkflows) Resume(ctx context.Context, stateFile, reason string) error {
	return f.control(stateFile, fmt.Sprintf("resume %q", reason), func(w *fakeWorkflow) error {
		w.wf.Paused = false
		return nil
	})
}

func (f *fakeWorkflows) Stop(ctx context.Context, stateFile, reason string) (server.Workflow, error) {
	return server.Workflow{}, f.control(stateFile, fmt.Sprintf("stop %q", reason), func(w *fakeWorkflow) error {
		w.wf.Running, w.wf.Paused, w.wf.Attempts = false, false, nil
		w.st.Control.Status = state.ControlStopped
		r := "manual stop: the workflow was cancelled"
		w.st.Control.StopReason = &r
		return nil
	})
}

func (f *fakeWorkflows) Redirect(ctx context.Context, stateFile string, c engine.Change) error {
	return f.control(stateFile, "redirect "+c.Reason, func(w *fakeWorkflow) error {
		if err := engine.Apply(w.st, c, time.Now()); err != nil {
			return &engine.RefusedError{Err: err}
		}
		return nil
	})
}

func (f *fakeWorkflows) syncsOf(stateFile string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w := f.loops[stateFile]; w != nil {
		return w.syncs
	}
	return 0
}

func (f *fakeWorkflows) edit(stateFile string, fn func(w *fakeWorkflow)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.loops[stateFile])
}

func (f *fakeWorkflows) callsOf(stateFile string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasSuffix(c, " "+stateFile) {
			out = append(out, strings.TrimSuffix(c, " "+stateFile))
		}
	}
	return out
}

// onTemporal marks a loop as aot run --engine temporal does and gives it a
// running workflow whose state is the loop's, running its first atom.
func (f *fakeWorkflows) onTemporal(t *testing.T, stateFile, id string) {
	t.Helper()
	st, err := state.NewStore(stateFile).Read()
	if err != nil {
		t.Fatal(err)
	}
	st.Control.Status = state.ControlRunning
	st.Atoms[0].Status = state.StatusInProgress
	f.mu.Lock()
	f.loops[stateFile] = &fakeWorkflow{st: st, wf: server.Workflow{ID: id, Running: true,
		Attempts: []server.WorkflowAttempt{{Atom: st.Atoms[0].ID, Attempt: 1, Started: time.Now()}}}}
	f.mu.Unlock()
	marker := journal.TemporalMarker(stateFile)
	os.MkdirAll(filepath.Dir(marker), 0o700)
	if err := os.WriteFile(marker, []byte(`{"workflow_id": "`+id+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
}

type temporalSummary struct {
	Status     string `json:"status"`
	StateFile  string `json:"state_file"`
	StopReason string `json:"stop_reason"`
	Engine     struct {
		Running  bool `json:"running"`
		Paused   bool `json:"paused"`
		Temporal *struct {
			WorkflowID string    `json:"workflow_id"`
			AskedAt    time.Time `json:"asked_at"`
		} `json:"temporal"`
	} `json:"engine"`
	Progress struct {
		Total, Resolved int
		InProgress      int `json:"in_progress"`
	} `json:"progress"`
	Running []struct {
		Atom, Role string
		Attempt    int
	} `json:"running"`
}

func (h *harness) temporalLoop(id string) temporalSummary {
	h.t.Helper()
	var s temporalSummary
	if code := h.do("GET", "/api/loops/"+id, nil, &s); code != 200 {
		h.t.Fatalf("GET loop %s: %d", id, code)
	}
	return s
}

func TestALoopOnTemporalIsKeptInStepWithItsWorkflowAndSteeredThroughIt(t *testing.T) {
	fake := &fakeWorkflows{loops: map[string]*fakeWorkflow{}}
	h := start(t, "", func(o *server.Options) { o.Temporal, o.TemporalEvery = fake, 20*time.Millisecond })
	onT, local, broken := h.create("A1", "A2"), h.create("B1"), h.create("C1")
	all := h.stream("/api/stream", "")
	sf := h.temporalLoop(onT).StateFile
	fake.onTemporal(t, sf, "aot-wf-1")
	brokenSF := h.temporalLoop(broken).StateFile
	fake.onTemporal(t, brokenSF, "aot-wf-2")
	fake.edit(brokenSF, func(w *fakeWorkflow) { w.err = errors.New("connect to Temporal at 127.0.0.1:1: refused") })

	// Nobody runs aot status: the server asks the workflow, again and again.
	h.waitFor("the workflow is asked a few times", func() bool { return fake.syncsOf(sf) >= 3 })
	h.waitFor("the summary says what the workflow said", func() bool {
		s := h.temporalLoop(onT)
		return s.Status == "running" && s.Engine.Running && s.Engine.Temporal != nil && s.Progress.InProgress == 1
	})
	s := h.temporalLoop(onT)
	if s.Engine.Temporal.WorkflowID != "aot-wf-1" || len(s.Running) != 1 || s.Running[0].Atom != "A1" || s.Running[0].Role != "worker" {
		t.Fatalf("summary: %+v", s)
	}
	// The workflow resolves A1 on its workers: the state file follows.
	fake.edit(sf, func(w *fakeWorkflow) {
		w.st.Atoms[0].Status = state.StatusResolved
		w.st.Atoms[1].Status = state.StatusInProgress
		w.wf.Attempts = []server.WorkflowAttempt{{Atom: "A2", Attempt: 1, Started: time.Now()}}
	})
	h.waitFor("A1 resolved, A2 running", func() bool {
		s := h.temporalLoop(onT)
		return s.Progress.Resolved == 1 && len(s.Running) == 1 && s.Running[0].Atom == "A2"
	})
	// A workflow that cannot be asked is said once on the streams; its
	// loop is still served from its file.
	all.next(t, "notice", "could not be asked (what is shown may be behind): connect to Temporal at 127.0.0.1:1: refused")
	if s := h.temporalLoop(broken); s.Status != "created" || s.Engine.Temporal != nil {
		t.Errorf("the loop whose workflow does not answer: %+v", s)
	}

	// The controls go to the workflow, with the local loops' answers.
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+onT+"/pause", map[string]any{"kill": true, "reason": "look"}, &out); code != 200 || out["paused"] != true || out["kill"] != true {
		t.Fatalf("pause: %d %v", code, out)
	}
	if s := h.temporalLoop(onT); s.Status != "paused" || !s.Engine.Paused {
		t.Errorf("after the pause: %+v", s)
	}
	if code := h.do("POST", "/api/loops/"+onT+"/start", map[string]any{"agent": "exec", "agent_command": "true"}, &out); code != 409 || !strings.Contains(fmt.Sprint(out["error"]), "aot-wf-1") {
		t.Errorf("start of a loop whose workflow runs: %d %v", code, out)
	}
	if code := h.do("POST", "/api/loops/"+onT+"/resume", map[string]any{}, &out); code != 200 || out["paused"] != false {
		t.Fatalf("resume: %d %v", code, out)
	}
	if code := h.do("POST", "/api/loops/"+onT+"/resume", map[string]any{}, &out); code != 409 {
		t.Errorf("resume of a running workflow: %d %v, want 409 as for a local loop", code, out)
	}
	if code := h.do("POST", "/api/loops/"+onT+"/redirect", map[string]any{"reason": "less", "remove_atoms": []string{"NOPE"}}, &out); code != 422 {
		t.Errorf("a redirect the workflow refuses: %d %v, want 422", code, out)
	}
	if code := h.do("POST", "/api/loops/"+onT+"/redirect", map[string]any{"reason": "fewer rounds", "max_iterations": 7}, &out); code != 200 ||
		out["applied_by"] != "engine" || fmt.Sprint(out["corrections"]) != "[constraint_change]" {
		t.Errorf("redirect: %d %v", code, out)
	}
	if code := h.do("POST", "/api/loops/"+onT+"/stop", map[string]any{"reason": "enough"}, &out); code != 200 || out["status"] != "stopped" {
		t.Fatalf("stop: %d %v", code, out)
	}
	s = h.temporalLoop(onT)
	if s.Status != "user_exit" || s.Engine.Running || !strings.HasPrefix(s.StopReason, "manual stop") {
		t.Errorf("after the stop: %+v", s)
	}
	want := []string{`pause kill=true "look"`, `resume "resumed from aot serve"`, "redirect less", "redirect fewer rounds", `stop "enough"`}
	if got := fake.callsOf(sf); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the workflow got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// An ended workflow is not asked again, and its loop has no engine.
	n := fake.syncsOf(sf)
	time.Sleep(200 * time.Millisecond) // ten rounds
	if fake.syncsOf(sf) != n {
		t.Errorf("the ended workflow was asked again: %d, then %d", n, fake.syncsOf(sf))
	}
	if code := h.do("POST", "/api/loops/"+onT+"/pause", map[string]any{}, &out); code != 409 {
		t.Errorf("pause of a loop whose workflow ended: %d %v, want 409", code, out)
	}

	// A loop not on Temporal is never asked, and its controls are the
	// local engine's.
	if code := h.do("POST", "/api/loops/"+local+"/pause", map[string]any{}, &out); code != 409 {
		t.Errorf("pause of a local loop with no engine: %d %v", code, out)
	}
	if s := h.temporalLoop(local); s.Engine.Temporal != nil || s.Status != "created" {
		t.Errorf("the local loop: %+v", s)
	}
	localSF := h.temporalLoop(local).StateFile
	if fake.syncsOf(localSF) != 0 || len(fake.callsOf(localSF)) != 0 {
		t.Errorf("the local loop reached the workflows: %v", fake.callsOf(localSF))
	}
	// Its marker gone (the attached aot run saw the end), a loop is local.
	os.Remove(journal.TemporalMarker(brokenSF))
	n = fake.syncsOf(brokenSF)
	time.Sleep(200 * time.Millisecond)
	if got := fake.syncsOf(brokenSF); got > n+1 {
		t.Errorf("a loop without its marker is still asked: %d, then %d", n, got)
	}
}
