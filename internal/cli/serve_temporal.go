//go:build temporal

package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/control"
	"github.com/aot-loop/aot/internal/durable"
	"github.com/aot-loop/aot/internal/engine"
)

// The Temporal side of the controls (control.Workflows), in aot-temporal:
// aot stop, pause, resume, redirect, status and aot serve reach a loop's
// workflow through one client kept while it is open, and plain aot reaches
// it through aot-temporal workflow-call (the hand-over, control.Serve).

type loopWorkflows struct{ w *workflows }

func openWorkflows() *loopWorkflows { return &loopWorkflows{w: newWorkflows()} }

func (s *loopWorkflows) Close() error { return s.w.Close() }

// Sync: a workflow no worker serves is said as a *control.NoWorkerError,
// with what Temporal knows of it.
func (s *loopWorkflows) Sync(ctx context.Context, stateFile string) (control.Workflow, error) {
	doc, err := s.w.sync(ctx, stateFile)
	if nw := (*noWorkerError)(nil); errors.As(err, &nw) {
		err = &control.NoWorkerError{Err: nw}
	}
	if doc == nil {
		return control.Workflow{}, err
	}
	return *doc, err // err: a hand edit kept aside, for the notice
}

func (s *loopWorkflows) Pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	return s.w.pause(ctx, stateFile, kill, reason)
}

func (s *loopWorkflows) Resume(ctx context.Context, stateFile, reason string) error {
	return s.w.resume(ctx, stateFile, reason)
}

// stopWait is how long a stop waits for a stopped workflow to close: its
// workers kill the running agents, a merge under way lands, the atoms'
// branches are swept.
const stopWait = 45 * time.Second

// Stop cancels the workflow and waits for it to close, then brings the
// state file in step with it and says how it ended. A workflow no worker
// serves cannot close (the stop is asked, and carried out when a worker
// polls), nor one whose workers take longer than stopWait: both are errors
// that say so.
func (s *loopWorkflows) Stop(ctx context.Context, stateFile, reason string) (control.Workflow, error) {
	if err := s.w.stop(ctx, stateFile, reason); err != nil {
		return control.Workflow{}, err
	}
	var cl durable.Closing
	var id string
	err := s.w.call(ctx, stateFile, func(ctx context.Context, c client.Client, m durable.Marker) (err error) {
		id = m.WorkflowID
		cl, err = durable.AwaitClose(ctx, c, m, stopWait)
		return err
	})
	switch {
	case err != nil:
		return control.Workflow{}, err
	case cl.Looked && !cl.Pollers.Serving() && !cl.Closed:
		return control.Workflow{}, &control.NoWorkerError{Err: &notClosedError{id: id, c: cl}}
	case !cl.Closed:
		return control.Workflow{}, &notClosedError{id: id, c: cl}
	}
	// The stopped state into the file, when the workflow answers at once
	// (an attached aot run does it too).
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, _ = s.w.sync(sctx, stateFile)
	cancel()
	wf := control.Workflow{ID: id, Status: cl.Status, Attempts: []control.WorkflowAttempt{}}
	if cl.Outcome != nil {
		wf.Outcome = cl.Outcome.Reason
	}
	return wf, nil
}

// notClosedError: a stop was asked, and the workflow has not closed.
type notClosedError struct {
	id string
	c  durable.Closing
}

func (e *notClosedError) Error() string {
	if e.c.Looked && !e.c.Pollers.Serving() {
		return fmt.Sprintf("the stop is asked of workflow %s, but it has not closed: %s, and only a worker carries a stop out. "+
			"It closes once one polls (aot worker --task-queue %s); temporal workflow terminate --workflow-id %s ends it at once, without its last merges and cleanup",
			e.id, e.c.Pollers.Missing(), e.c.Pollers.Queue, e.id)
	}
	return fmt.Sprintf("the stop is asked of workflow %s, but it has not closed within %s (Temporal says %s): its workers are still stopping its attempts; aot status says when it has", e.id, stopWait, e.c.Status)
}

// Redirect: with no worker to validate the change the Update would wait
// for one, so it is refused at once.
func (s *loopWorkflows) Redirect(ctx context.Context, stateFile string, c engine.Change) error {
	err := s.w.redirect(ctx, stateFile, c)
	if nw := (*noWorkerError)(nil); errors.As(err, &nw) {
		return &control.NoWorkerError{Err: err}
	}
	return err
}

// workflowCallRun is aot-temporal workflow-call: one call of the controls'
// Temporal side, asked by plain aot as JSON on stdin and answered as JSON on
// stdout (control.Serve). Exit 1 when the call failed; the answer's code
// says how.
func workflowCallRun(ctx context.Context, d *deps) error {
	w := openWorkflows()
	defer w.Close()
	if err := control.Serve(ctx, d.io.In, d.io.Out, w); err != nil {
		return reported(exitFail)
	}
	return nil
}
