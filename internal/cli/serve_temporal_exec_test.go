//go:build !temporal

package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/server"
	"github.com/aot-loop/aot/internal/state"
)

// Every change the API takes reaches aot-temporal redirect unchanged.
func TestTemporalRedirectArgsCarryTheWholeChange(t *testing.T) {
	n, cost, tokens, wall := 3, 2.5, int64(9000), "2h"
	for _, c := range []engine.Change{
		{Reason: "fewer rounds", MaxIterations: &n},
		{Reason: "-a reason with a dash", Goal: "--ship v2", BackgroundIntent: "b=c", Deliverables: "d", DefinitionOfDone: "done"},
		{Reason: "r", AddAtoms: []state.Atom{{ID: "X", Description: "a=b", DependsOn: []string{"A", "B"}, Status: state.StatusPending}, {ID: "Y", Description: "y", Status: state.StatusPending}},
			RemoveAtoms: []string{"A", "B"}, Select: []engine.ORSelect{{Group: "G", Choice: "C"}}},
		{Reason: "r", MaxParallelAgents: &n, MaxStallCount: &n, MaxAttemptsPerAtom: &n, MaxWallTime: &wall, MaxCostUSD: &cost, MaxTokens: &tokens, ClearBindings: []string{"A"}},
	} {
		t.Run(c.Reason, func(t *testing.T) {
			var out bytes.Buffer
			d := &deps{io: &streams{Out: &out, ErrOut: &out}, getenv: func(string) string { return "" }, now: time.Now}
			var got engine.Change
			cmd := newCmdRedirect(d, &globalOptions{}, func(o *redirectOptions) error { got = o.Change; return nil })
			args := redirectArgs(c)
			if args[0] != "redirect" {
				t.Fatalf("args %q", args)
			}
			cmd.SetArgs(args[1:])
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("aot %s: %v\n%s", strings.Join(args, " "), err, out.String())
			}
			if diff := cmp.Diff(c, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the change after the command line (-sent +got):\n%s", diff)
			}
		})
	}
}

// fakeTemporal is an aot-temporal that logs its arguments and answers as
// the real one does on each path.
const fakeTemporal = `#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
case "$1" in
status)
  if [ -f "$(dirname "$0")/down" ]; then
    echo '{"goal": "g"}'
    echo 'aot: the state file may be behind its Temporal workflow: connect to Temporal at 127.0.0.1:1: refused' >&2
    echo 'aot: the journal has a torn line' >&2
    exit 0
  fi
  echo '{"goal": "g", "workflow": {"workflow_id": "aot-1", "running": true, "paused": true, "attempts": [{"atom": "A", "attempt": 2, "started": "2026-01-02T03:04:05Z"}]}}' ;;
pause) echo 'aot: workflow aot-1: the service is down' >&2; exit 1 ;;
resume) echo '{"success": false, "error": "the loop is not paused", "code": "not_paused"}'; exit 1 ;;
stop) echo '{"success": false, "error": "no engine runs the loop", "code": "no_engine"}'; exit 1 ;;
redirect)
  case "$*" in
  *--max-iterations=-1*) echo '{"success": false, "error": "limits must not be negative"}'; exit 2 ;;
  esac
  echo '{"success": false, "error": "the loop has ended", "code": "refused"}'; exit 1 ;;
esac
`

// aot serve asks the workflows through aot-temporal's commands; their
// failures arrive as the errors the API tells apart.
func TestTemporalServeAsksWorkflowsThroughAotTemporal(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "aot-temporal")
	if err := os.WriteFile(bin, []byte(fakeTemporal), 0o755); err != nil {
		t.Fatal(err)
	}
	w := &serveWorkflows{bin: func() (string, error) { return bin, nil }}
	ctx := context.Background()
	const sf = "/p/.claude/aot-loop-state.md"

	wf, err := w.Sync(ctx, sf)
	want := server.Workflow{ID: "aot-1", Running: true, Paused: true,
		Attempts: []server.WorkflowAttempt{{Atom: "A", Attempt: 2, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}}
	if err != nil || !cmp.Equal(want, wf) {
		t.Errorf("Sync: %v\n%s", err, cmp.Diff(want, wf))
	}
	os.WriteFile(filepath.Join(dir, "down"), nil, 0o644)
	if _, err := w.Sync(ctx, sf); err == nil || err.Error() != "the state file may be behind its Temporal workflow: connect to Temporal at 127.0.0.1:1: refused" {
		t.Errorf("Sync of a workflow that cannot be asked: %v", err)
	}

	var ef *execFailure
	if err := w.Pause(ctx, sf, true, "look"); !errors.As(err, &ef) || err.Error() != "workflow aot-1: the service is down" {
		t.Errorf("Pause: %v", err)
	}
	if err := w.Resume(ctx, sf, "go"); !errors.Is(err, engine.ErrNotPaused) {
		t.Errorf("Resume: %v", err)
	}
	var ne *engine.ErrNoEngine
	if err := w.Stop(ctx, sf, "enough"); !errors.As(err, &ne) {
		t.Errorf("Stop: %v", err)
	}
	var re *engine.RefusedError
	n, bad := 5, -1
	if err := w.Redirect(ctx, sf, engine.Change{Reason: "r", MaxIterations: &n}); !errors.As(err, &re) || err.Error() != "the loop has ended" {
		t.Errorf("Redirect refused by the workflow: %v", err)
	}
	if err := w.Redirect(ctx, sf, engine.Change{Reason: "r", MaxIterations: &bad}); !errors.As(err, &re) {
		t.Errorf("Redirect aot redirect cannot take: %v", err)
	}

	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	wantCalls := strings.Join([]string{
		"status --events 0 --state-file=" + sf + " --json",
		"status --events 0 --state-file=" + sf + " --json",
		"pause --reason=look --kill --state-file=" + sf + " --json",
		"resume --reason=go --state-file=" + sf + " --json",
		"stop --reason=enough --state-file=" + sf + " --json",
		"redirect --reason=r --max-iterations=5 --state-file=" + sf + " --json",
		"redirect --reason=r --max-iterations=-1 --state-file=" + sf + " --json",
	}, "\n") + "\n"
	if diff := cmp.Diff(wantCalls, string(calls)); diff != "" {
		t.Errorf("aot-temporal's command lines (-want +got):\n%s", diff)
	}

	// Without aot-temporal, the error says how to get it.
	t.Setenv("PATH", t.TempDir())
	if _, err := newServeWorkflows().Sync(ctx, sf); err == nil || !strings.Contains(err.Error(), "make build builds it") {
		t.Errorf("no aot-temporal: %v", err)
	}
}
