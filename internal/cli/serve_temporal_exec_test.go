//go:build !temporal

package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/control"
	"github.com/aot-loop/aot/internal/engine"
)

// fakeTemporal is an aot-temporal that logs its arguments and the request
// it read, and answers as the real one does on each path.
const fakeTemporal = `#!/bin/sh
req=$(cat)
echo "$@ $req" >> "$(dirname "$0")/calls"
case "$req" in
*'"op":"sync"'*)
  if [ -f "$(dirname "$0")/down" ]; then
    echo '{"code": "failed", "message": "connect to Temporal at 127.0.0.1:1: refused"}'
    exit 1
  fi
  echo '{"code": "ok", "workflow": {"workflow_id": "aot-1", "running": true, "paused": true, "attempts": [{"atom": "A", "attempt": 2, "started": "2026-01-02T03:04:05Z"}]}}' ;;
*'"op":"pause"'*) echo 'aot: workflow aot-1: the service is down' >&2; exit 1 ;;
*'"op":"resume"'*) echo '{"code": "not_paused", "message": "the loop is not paused"}'; exit 1 ;;
*'"op":"stop"'*) echo '{"code": "no_worker", "message": "no worker polls task queue q"}'; exit 1 ;;
*'"op":"redirect"'*) echo '{"code": "refused", "message": "the loop has ended"}'; exit 1 ;;
esac
`

// aot reaches the workflows through aot-temporal workflow-call: a JSON
// request on its stdin, a JSON answer with a code on its stdout; the codes
// arrive as the errors the API and the commands tell apart.
func TestTemporalServeAsksWorkflowsThroughAotTemporal(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "aot-temporal")
	if err := os.WriteFile(bin, []byte(fakeTemporal), 0o755); err != nil {
		t.Fatal(err)
	}
	w := &loopWorkflows{Remote: control.Remote{Run: workflowCall(func() (string, error) { return bin, nil })}}
	ctx := context.Background()
	const sf = "/p/.claude/aot-loop-state.md"

	wf, err := w.Sync(ctx, sf)
	want := control.Workflow{ID: "aot-1", Running: true, Paused: true,
		Attempts: []control.WorkflowAttempt{{Atom: "A", Attempt: 2, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}}
	if err != nil || !cmp.Equal(want, wf) {
		t.Errorf("Sync: %v\n%s", err, cmp.Diff(want, wf))
	}
	os.WriteFile(filepath.Join(dir, "down"), nil, 0o644)
	if _, err := w.Sync(ctx, sf); err == nil || err.Error() != "connect to Temporal at 127.0.0.1:1: refused" {
		t.Errorf("Sync of a workflow that cannot be asked: %v", err)
	}

	// A failure without an answer is said with its stderr's last line.
	if err := w.Pause(ctx, sf, true, "look"); err == nil || err.Error() != "workflow aot-1: the service is down" {
		t.Errorf("Pause: %v", err)
	}
	if err := w.Resume(ctx, sf, "go"); !errors.Is(err, engine.ErrNotPaused) {
		t.Errorf("Resume: %v", err)
	}
	var nw *control.NoWorkerError
	if _, err := w.Stop(ctx, sf, "enough"); !errors.As(err, &nw) || err.Error() != "no worker polls task queue q" {
		t.Errorf("Stop: %v", err)
	}
	var re *engine.RefusedError
	n := 5
	if err := w.Redirect(ctx, sf, engine.Change{Reason: "r", MaxIterations: &n}); !errors.As(err, &re) || err.Error() != "the loop has ended" {
		t.Errorf("Redirect refused by the workflow: %v", err)
	}

	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	wantCalls := strings.Join([]string{
		`workflow-call {"op":"sync","state_file":"` + sf + `"}`,
		`workflow-call {"op":"sync","state_file":"` + sf + `"}`,
		`workflow-call {"op":"pause","state_file":"` + sf + `","kill":true,"reason":"look"}`,
		`workflow-call {"op":"resume","state_file":"` + sf + `","reason":"go"}`,
		`workflow-call {"op":"stop","state_file":"` + sf + `","reason":"enough"}`,
		`workflow-call {"op":"redirect","state_file":"` + sf + `","change":{"reason":"r","max_iterations":5}}`,
	}, "\n") + "\n"
	if diff := cmp.Diff(wantCalls, string(calls)); diff != "" {
		t.Errorf("aot-temporal's command lines and requests (-want +got):\n%s", diff)
	}

	// Without aot-temporal, the error says how to get it.
	t.Setenv("PATH", t.TempDir())
	if _, err := openWorkflows().Sync(ctx, sf); err == nil || !strings.Contains(err.Error(), "make build builds it") {
		t.Errorf("no aot-temporal: %v", err)
	}
}
