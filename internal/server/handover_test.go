package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/control"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/server"
)

// asWorkflowCall makes the test binary serve one hand-over call, as
// aot-temporal workflow-call does, with refusingWorkflow as its Temporal
// side; its calls are logged to the file the variable names.
const asWorkflowCall = "AOT_SERVER_TEST_AS_WORKFLOW_CALL"

// refusingWorkflow is a paused workflow that turns every control down,
// each with the failure the API tells apart.
type refusingWorkflow struct{ log string }

func (w refusingWorkflow) note(s string) {
	f, err := os.OpenFile(w.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		fmt.Fprintln(f, s)
		f.Close()
	}
}

func (w refusingWorkflow) Sync(ctx context.Context, stateFile string) (control.Workflow, error) {
	w.note("sync")
	return control.Workflow{ID: "aot-refusing", Running: true, Paused: true, Attempts: []control.WorkflowAttempt{}}, nil
}

func (w refusingWorkflow) Pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	w.note("pause " + reason)
	return &control.NoWorkerError{Err: errors.New("no worker polls task queue q, so workflow aot-refusing cannot act")}
}

func (w refusingWorkflow) Resume(ctx context.Context, stateFile, reason string) error {
	w.note("resume " + reason)
	return engine.ErrNotPaused
}

func (w refusingWorkflow) Stop(ctx context.Context, stateFile, reason string) (control.Workflow, error) {
	w.note("stop " + reason)
	return control.Workflow{}, &engine.ErrNoEngine{StateFile: stateFile}
}

func (w refusingWorkflow) Redirect(ctx context.Context, stateFile string, c engine.Change) error {
	w.note("redirect " + c.Reason + " " + strings.Join(c.RemoveAtoms, ","))
	return &engine.RefusedError{Err: errors.New("atom NOPE: no such atom")}
}

// TestHandOverHelper is the process a hand-over call runs (not a test).
func TestHandOverHelper(t *testing.T) {
	log := os.Getenv(asWorkflowCall)
	if log == "" {
		return
	}
	if err := control.Serve(context.Background(), os.Stdin, os.Stdout, refusingWorkflow{log: log}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// A failure of a workflow's control crosses the hand-over to aot-temporal
// (another process, a JSON answer with a code) and reaches the API's client
// as the HTTP status a local loop's failure of that kind gets.
func TestAHandedOverFailureReachesTheAPIAsItsStatus(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "calls")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, asAOT+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, asWorkflowCall+"="+log)
	remote := control.Remote{Run: func(ctx context.Context, in io.Reader, out io.Writer) error {
		cmd := exec.CommandContext(ctx, self, "-test.run=^TestHandOverHelper$")
		cmd.Env, cmd.Stdin, cmd.Stdout = env, in, out
		return cmd.Run()
	}}
	h := start(t, "", func(o *server.Options) { o.Temporal, o.TemporalEvery = remote, time.Hour })
	id := h.create("A1")
	sf := h.temporalLoop(id).StateFile
	marker := journal.TemporalMarker(sf)
	os.MkdirAll(filepath.Dir(marker), 0o700)
	if err := os.WriteFile(marker, []byte(`{"workflow_id": "aot-refusing"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(sf)

	for _, tc := range []struct {
		path string
		body map[string]any
		code int
		says string
	}{
		{"pause", map[string]any{"reason": "look"}, 503, "no worker polls task queue q"},
		{"resume", map[string]any{"reason": "go on"}, 409, "the loop is not paused"},
		{"stop", map[string]any{"reason": "enough"}, 409, "no engine runs the loop of " + sf},
		{"redirect", map[string]any{"reason": "less", "remove_atoms": []string{"NOPE"}}, 422, "atom NOPE: no such atom"},
	} {
		var out map[string]any
		if code := h.do("POST", "/api/loops/"+id+"/"+tc.path, tc.body, &out); code != tc.code || !strings.Contains(fmt.Sprint(out["error"]), tc.says) {
			t.Errorf("%s: %d %v, want %d saying %q", tc.path, code, out, tc.code, tc.says)
		}
	}
	calls, _ := os.ReadFile(log)
	want := "sync\npause look\nsync\nresume go on\nsync\nstop enough\nsync\nredirect less NOPE\n"
	if string(calls) != want {
		t.Errorf("the workflow side got:\n%s\nwant:\n%s", calls, want)
	}
	if after, _ := os.ReadFile(sf); string(after) != string(before) {
		t.Errorf("refused controls changed the state file")
	}
}
