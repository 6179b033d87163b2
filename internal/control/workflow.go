package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aot-loop/aot/internal/engine"
)

// Workflows reaches the workflow of a loop that runs on Temporal, named by
// its state file. The Temporal side provides it (aot-temporal, or aot
// through the hand-over to aot-temporal, handover.go): the Temporal SDK is
// no part of this package.
type Workflows interface {
	// Sync asks the workflow where it stands and projects its state into
	// the state file. A workflow no worker serves cannot be asked: the
	// answer is what Temporal knows, the error a *NoWorkerError.
	Sync(ctx context.Context, stateFile string) (Workflow, error)
	// Pause and Resume signal the workflow; it acts on them at its next
	// task.
	Pause(ctx context.Context, stateFile string, kill bool, reason string) error
	Resume(ctx context.Context, stateFile, reason string) error
	// Stop cancels the workflow: it kills its running attempts and ends.
	// It may wait for the workflow to close, and then returns what the
	// closed workflow says (else a Workflow without ID).
	Stop(ctx context.Context, stateFile, reason string) (Workflow, error)
	// Redirect returns once the workflow has applied the change; a change
	// it refused is an *engine.RefusedError.
	Redirect(ctx context.Context, stateFile string, c engine.Change) error
}

// Workflow is what a loop's workflow answered; aot status --json shows it
// as its "workflow".
type Workflow struct {
	ID      string `json:"workflow_id"`
	Running bool   `json:"running"` // it has not ended
	// Status is Temporal's word for it (Running, Completed, Canceled...).
	Status string `json:"status,omitempty"`
	// NoWorker says that no worker polls its task queue: the workflow
	// could not be asked, and waits.
	NoWorker bool `json:"no_worker,omitempty"`
	// TaskQueue is the queue its tasks wait on; Workers the identities of
	// the workers that poll it lately.
	TaskQueue string   `json:"task_queue,omitempty"`
	Workers   []string `json:"workers,omitempty"`
	Paused    bool     `json:"paused"`
	// PausedSince and PausedKill describe the pause in force (nil: the
	// workflow did not say).
	PausedSince *time.Time        `json:"paused_since,omitempty"`
	PausedKill  bool              `json:"paused_kill,omitempty"`
	Attempts    []WorkflowAttempt `json:"attempts"` // in flight, on the workers
	Outcome     string            `json:"outcome,omitempty"`
}

// WorkflowAttempt is an agent attempt the workflow waits for.
type WorkflowAttempt struct {
	Atom    string    `json:"atom"`
	Attempt int       `json:"attempt"`
	Started time.Time `json:"started"`
}

// NoWorkerError: no worker polls the workflow's task queue, so it can
// neither answer nor act until one does.
type NoWorkerError struct{ Err error }

func (e *NoWorkerError) Error() string { return e.Err.Error() }
func (e *NoWorkerError) Unwrap() error { return e.Err }

// RecordedError: a pause or resume the workflow has recorded but cannot
// act on yet (Err says why, a *NoWorkerError). The CLI says so and
// succeeds: the signal is kept.
type RecordedError struct{ Err error }

func (e *RecordedError) Error() string { return "the signal is recorded, but " + e.Err.Error() }
func (e *RecordedError) Unwrap() error { return e.Err }

// UnreachableError: the loop runs on Temporal and its workflow could not
// be asked.
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string {
	return "the loop runs on Temporal and its workflow could not be asked: " + e.Err.Error()
}
func (e *UnreachableError) Unwrap() error { return e.Err }

// answered splits what Sync returned: an answer with something to say (a
// hand edit of the state file, kept aside) stands, and what it says is a
// notice; anything else is an error.
func answered(wf Workflow, err error) (failed, notice error) {
	var n interface{ Notice() string }
	if err != nil && wf.ID != "" && errors.As(err, &n) {
		return nil, err
	}
	return err, nil
}

// awaitEvery is how often a control asks the workflow whether it has acted.
const awaitEvery = 200 * time.Millisecond

// workflowLoop is the controls of a loop whose workflow runs. Each waits,
// as the local engine's do, until the workflow has acted: a signal or a
// cancel is recorded at once, acted on at the workflow's next task.
type workflowLoop struct {
	t         Workflows
	stateFile string
	last      Workflow // what the workflow answered when For asked
	syncErr   error    // For could not ask it
	notice    error    // what its answer had to say (a hand edit kept aside)
}

func (w *workflowLoop) Kind() Kind { return Temporal }

// reached is the error of a control when For could not ask the workflow.
func (w *workflowLoop) reached() error {
	var nw *NoWorkerError
	if w.syncErr == nil || errors.As(w.syncErr, &nw) {
		return nil // one with no worker still takes signals and a cancel
	}
	return &UnreachableError{Err: w.syncErr}
}

func (w *workflowLoop) Pause(ctx context.Context, kill bool, reason string) error {
	if err := w.reached(); err != nil {
		return err
	}
	if err := w.t.Pause(ctx, w.stateFile, kill, reason); err != nil {
		return err
	}
	return w.await(ctx, "paused", func(wf Workflow) bool { return wf.Paused || !wf.Running })
}

func (w *workflowLoop) Resume(ctx context.Context, reason string) error {
	if err := w.reached(); err != nil {
		return err
	}
	if w.syncErr == nil && !w.last.Paused {
		return engine.ErrNotPaused
	}
	if err := w.t.Resume(ctx, w.stateFile, reason); err != nil {
		return err
	}
	return w.await(ctx, "resumed", func(wf Workflow) bool { return !wf.Paused })
}

// Stop waits until the workflow has ended, then reads the stopped state
// the last answer projected into the state file.
func (w *workflowLoop) Stop(ctx context.Context, reason string) (StopResult, error) {
	if err := w.reached(); err != nil {
		return StopResult{}, err
	}
	closed, err := w.t.Stop(ctx, w.stateFile, reason)
	if err != nil {
		return StopResult{}, err
	}
	if closed.ID != "" && !closed.Running {
		// Once closed, the workflow may be forgotten at once (an attached
		// aot run removes its marker): it is asked once more, for those
		// who keep its answers (the server), and what it said stands.
		w.last = closed
		if wf, err := w.t.Sync(ctx, w.stateFile); err == nil && !wf.Running && wf.Outcome == closed.Outcome {
			w.last = wf
		}
	} else if err := w.await(ctx, "ended", func(wf Workflow) bool { return !wf.Running }); err != nil {
		return StopResult{}, err
	}
	res := StopResult{Workflow: &w.last}
	st, err := readState(w.stateFile)
	if err != nil {
		return res, err
	}
	res.StopResult = engine.StopResultOf(st, 0)
	return res, nil
}

// Redirect reports the corrections the workflow recorded, as the local
// engine's does: those the state file has after the change and did not
// before (both fresh from the workflow).
func (w *workflowLoop) Redirect(ctx context.Context, c engine.Change) (engine.RedirectResult, error) {
	res := engine.RedirectResult{AppliedBy: "engine", Corrections: []string{}}
	if err := w.reached(); err != nil {
		return res, err
	}
	before, err := readState(w.stateFile)
	if err != nil {
		return res, err
	}
	if err := w.t.Redirect(ctx, w.stateFile, c); err != nil {
		return res, err
	}
	if err, _ := answered(w.t.Sync(ctx, w.stateFile)); err != nil {
		return res, nil // applied; the corrections show once the workflow answers
	}
	after, err := readState(w.stateFile)
	if err != nil {
		return res, nil
	}
	res.Corrections = engine.AddedCorrections(before, after)
	return res, nil
}

// Status is what For's question answered: an error says why the workflow
// could not be asked (the Workflow, when set, is what Temporal knew), or
// what its answer had to say.
func (w *workflowLoop) Status(ctx context.Context) (Status, error) {
	st := Status{Kind: Temporal}
	if w.last.ID != "" {
		wf := w.last
		st.Workflow, st.Running = &wf, wf.Running
		if wf.Paused {
			p := engine.PauseInfo{Kill: wf.PausedKill}
			if wf.PausedSince != nil {
				p.Since = *wf.PausedSince
			}
			st.Paused = &p
		}
	}
	if w.syncErr != nil {
		return st, w.syncErr
	}
	return st, w.notice
}

// await asks the workflow until cond holds or ctx ends. A workflow no
// worker serves cannot act yet: said at once as a *RecordedError.
func (w *workflowLoop) await(ctx context.Context, what string, cond func(Workflow) bool) error {
	tick := time.NewTicker(awaitEvery)
	defer tick.Stop()
	for {
		wf, err := w.t.Sync(ctx, w.stateFile)
		err, _ = answered(wf, err)
		if wf.ID != "" {
			w.last = wf
		}
		var nw *NoWorkerError
		switch {
		case err == nil && cond(wf):
			return nil
		case errors.As(err, &nw):
			return &RecordedError{Err: nw}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("the request was sent to the loop's Temporal workflow, which has not answered since (%w): %w", ctx.Err(), err)
			}
			return fmt.Errorf("the loop's Temporal workflow %s has not %s (%w); the request stays with it", wf.ID, what, ctx.Err())
		case <-tick.C:
		}
	}
}
