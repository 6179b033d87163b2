package durable

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// The recorded histories in testdata/history come from a real Temporal
// server (TestWorkflowRecordHistory); replaying them proves that the
// workflow code still makes the same decisions, in the same order, from the
// same events: that a change to it does not break loops in flight.

const historyDir = "testdata/history"

// recordedAs names the histories TestWorkflowRecordHistory writes: the
// workflow's latest change of commands (loop-run*.json are from before
// the atoms' branches were deleted at the end, clean-branches-run*.json
// from before activity ids named atom and attempt, activity-ids-run*.json
// from before merges were batched, merge-batch-run*.json from before both
// were in one workflow, batched-named-run*.json from before an attempt's
// slot was freed once its work was pushed, free-slot-run*.json from before
// workers held their commits for a merge of their own).
const recordedAs = "held"

func TestWorkflowReplaysRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(historyDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories in %s (%v)", historyDir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: DataConverter()})
			if err != nil {
				t.Fatal(err)
			}
			RegisterWorkflow(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay: %v", err)
			}
		})
	}
}

// TestWorkflowRecordHistory runs a loop on a real server and writes its
// histories (one file per run of the workflow) to testdata/history. It runs
// only with AOT_RECORD_HISTORY=host:port, e.g. against
// temporal server start-dev --headless --ip 127.0.0.1 --port 17233.
// The loop retries a failed attempt, backtracks an OR group, is paused,
// redirected (an atom added) and resumed, and continues as new once.
func TestWorkflowRecordHistory(t *testing.T) {
	addr := os.Getenv("AOT_RECORD_HISTORY")
	if addr == "" {
		t.Skip("AOT_RECORD_HISTORY=host:port of a Temporal server records the histories")
	}
	c, err := client.Dial(client.Options{HostPort: addr, DataConverter: DataConverter()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := fmt.Sprintf("aot-record-%d", time.Now().UnixNano())
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		time.Sleep(300 * time.Millisecond) // room for the signals and the update
		switch {
		case in.Task.Atom.ID == "X1", in.Task.Atom.ID == "A" && in.Task.Attempt == 1:
			return failure("not this way"), nil
		}
		// A's second attempt is held by a worker that merges it; D's by
		// one that is gone (its batch falls back to the shared queue).
		r := success(in)
		switch {
		case !in.Hold:
		case in.Task.Atom.ID == "A":
			r.HeldOn = queue + "-own"
		case in.Task.Atom.ID == "D":
			r.HeldOn = queue + "-gone"
		}
		return r, nil
	}
	own := worker.New(c, queue+"-own", worker.Options{DisableWorkflowWorker: true})
	own.RegisterActivityWithOptions(w.mergeBatch, activity.RegisterOptions{Name: MergeBatchActivity})
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	wk := worker.New(c, queue, worker.Options{})
	RegisterWorkflow(wk)
	wk.RegisterActivityWithOptions(w.attempt, activity.RegisterOptions{Name: AttemptActivity})
	wk.RegisterActivityWithOptions(w.merge, activity.RegisterOptions{Name: MergeActivity})
	wk.RegisterActivityWithOptions(w.mergeBatch, activity.RegisterOptions{Name: MergeBatchActivity})
	wk.RegisterActivityWithOptions(w.verify, activity.RegisterOptions{Name: VerifyActivity})
	wk.RegisterActivityWithOptions(w.clean, activity.RegisterOptions{Name: CleanActivity})
	if err := wk.Start(); err != nil {
		t.Fatal(err)
	}
	defer wk.Stop()

	data := loopState(state.Constraints{MaxParallelAgents: 2}, []state.Atom{
		atom("A"),
		{ID: "X1", Description: "the first way", ORGroup: "way"},
		{ID: "X2", Description: "the second way", ORGroup: "way"},
		atom("C", "A", "X1"),
	}, func(s *state.State) {
		s.ORGroups = []state.ORGroup{{Name: "way", Choices: []string{"X1", "X2"}, Selected: "X1", Failed: []string{}}}
	})
	in := input(data)
	in.ContinueAfter = 6
	ctx := context.Background()
	id := "aot-record-" + queue
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := c.SignalWorkflow(ctx, id, "", SignalPause, PauseRequest{Reason: "a look"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.QueryWorkflow(ctx, id, "", QueryStatus, 0); err != nil {
		t.Fatal(err)
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: UpdateRedirect, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{engine.Change{Reason: "one more", AddAtoms: []state.Atom{atom("D", "A")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.SignalWorkflow(ctx, id, "", SignalResume, ResumeRequest{}); err != nil {
		t.Fatal(err)
	}
	var out Outcome
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	wantReason(t, out, engine.Completed)

	if err := os.MkdirAll(historyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The histories of earlier versions of the workflow stay: loops they
	// recorded may still be in flight, and must replay.
	old, _ := filepath.Glob(filepath.Join(historyDir, recordedAs+"-run*.json"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	runID := run.GetRunID()
	for n := 1; runID != ""; n++ {
		hist, next := history(t, c, id, runID)
		js, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(historyDir, fmt.Sprintf("%s-run%d.json", recordedAs, n)), js, 0o644); err != nil {
			t.Fatal(err)
		}
		runID = next
	}
}

// history reads one run's events, and the run it continued as, if any.
func history(t *testing.T, c client.Client, id, runID string) (*historypb.History, string) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	next := ""
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
		if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			next = a.GetNewExecutionRunId()
		}
	}
	return h, next
}
