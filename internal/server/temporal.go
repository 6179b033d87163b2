package server

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/control"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
)

// Loops on Temporal (aot run --engine temporal left its marker beside the
// journal): the workflow is the engine and the truth. Their state files
// follow their workflows only while an aot run is attached, so the server
// asks every such workflow itself, each TemporalEvery, and has its state
// projected into the state file; a person's controls go to the workflow.

// TemporalLoops reaches the workflow of a loop that runs on Temporal, named
// by its state file (control.Workflows). The CLI provides it: the Temporal
// SDK is no part of the server.
type TemporalLoops = control.Workflows

// Workflow is what a loop's workflow answered.
type Workflow = control.Workflow

// WorkflowAttempt is an agent attempt the workflow waits for.
type WorkflowAttempt = control.WorkflowAttempt

const (
	maxWorkflowQuestions = 4                // asked at once
	workflowTimeout      = 15 * time.Second // for one answer
)

// workflowInfo is what the summary's engine says of a loop on Temporal.
type workflowInfo struct {
	WorkflowID string    `json:"workflow_id"`
	AskedAt    time.Time `json:"asked_at"` // when the workflow last answered
}

// workflow is what l's workflow said when last asked; nil when l does not
// run on Temporal (or its workflow has not answered yet).
func (l *loop) workflow() (*Workflow, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wf, l.wfAt
}

// keepWorkflows asks the workflows of the loops on Temporal, at once and
// then every TemporalEvery, until ctx ends.
func (s *Server) keepWorkflows(ctx context.Context) {
	if s.opts.Temporal == nil {
		return
	}
	tick := time.NewTicker(s.opts.TemporalEvery)
	defer tick.Stop()
	for {
		s.askWorkflows(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// askWorkflows asks every due workflow, a few at a time, and waits for the
// answers: a slow Temporal delays the next round, it never piles them up.
func (s *Server) askWorkflows(ctx context.Context) {
	sem := make(chan struct{}, maxWorkflowQuestions)
	var wg sync.WaitGroup
	for _, l := range s.reg.all() {
		if ctx.Err() != nil {
			break
		}
		if !s.workflowDue(l) {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, _ = s.askWorkflow(ctx, l)
		}()
	}
	wg.Wait()
}

// workflowDue says whether l's workflow is to be asked: l runs on Temporal
// and its workflow was not seen ended. An ended workflow is asked again
// only once the marker changes (a new aot run --engine temporal). A loop
// whose marker went away is a local loop again.
func (s *Server) workflowDue(l *loop) bool {
	var marker fileStamp
	if _, err := l.checked(); err == nil {
		marker = stampOf(journal.TemporalMarker(l.stateFile))
	}
	l.mu.Lock()
	forgot := !marker.ok && l.wf != nil
	if !marker.ok {
		l.wf, l.wfErr, l.wfEnded = nil, "", fileStamp{}
	}
	due := marker.ok && marker != l.wfEnded
	l.mu.Unlock()
	if forgot {
		s.stateChanged(l)
	}
	return due
}

// askWorkflow brings l's state file in step with its workflow and keeps
// what the workflow said. What changes the summary is published as a state
// message; a failure as a notice, once until it changes.
func (s *Server) askWorkflow(ctx context.Context, l *loop) (Workflow, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	// The workflow's state is projected into the state file: a write.
	_, err := l.checked()
	var wf Workflow
	if err == nil {
		qctx, cancel := context.WithTimeout(ctx, workflowTimeout)
		wf, err = s.opts.Temporal.Sync(qctx, l.stateFile)
		cancel()
	}
	// An answer with something to say (a hand edit of the state file, kept
	// aside) stands; what it says is a notice.
	var n interface{ Notice() string }
	if errors.As(err, &n) && wf.ID != "" {
		s.reg.notice(l, n.Notice())
		err = nil
	}
	if err != nil && ctx.Err() != nil {
		return wf, err // the server stops, or the request went away
	}
	l.mu.Lock()
	was, wasErr := l.wf, l.wfErr
	if err != nil {
		l.wfErr = err.Error()
	} else {
		l.wf, l.wfAt, l.wfErr = &wf, s.opts.Now(), ""
		if !wf.Running {
			l.wfEnded = stampOf(journal.TemporalMarker(l.stateFile))
		}
	}
	l.mu.Unlock()
	switch {
	case err != nil && err.Error() != wasErr:
		s.reg.notice(l, "the loop runs on Temporal and its workflow could not be asked (what is shown may be behind): "+err.Error())
	case err == nil && wasErr != "":
		s.log.Info("the loop's Temporal workflow answers again", "loop", l.id)
	}
	if err == nil && (was == nil || !reflect.DeepEqual(*was, wf)) {
		s.stateChanged(l)
	}
	return wf, err
}

// stateChanged tells the streams that l's summary changed without a
// journal event.
func (s *Server) stateChanged(l *loop) {
	s.hub.publish(message{loop: l.id, kind: "state", data: mustJSON(map[string]string{"loop_id": l.id})})
}

// workflowRunning names l's workflow while it runs.
func (l *loop) workflowRunning() (string, bool) {
	wf, _ := l.workflow()
	if wf == nil || !wf.Running {
		return "", false
	}
	return wf.ID, true
}

// controlsOf picks l's controls (control.For). A loop on Temporal whose
// workflow is due is steered through it, asked first through askWorkflow so
// that what the server shows follows every answer. One whose workflow was
// seen ended has no engine: the local controls act on its state file, from
// which the next aot run --engine temporal starts.
func (s *Server) controlsOf(ctx context.Context, l *loop) (control.Controller, error) {
	// A state that cannot be read is said as such, before any engine is
	// bothered with it.
	if _, err := l.read(); err != nil {
		return nil, err
	}
	var t control.Workflows
	if s.opts.Temporal != nil && s.workflowDue(l) {
		t = loopWorkflow{s: s, l: l}
	}
	return control.For(ctx, l.stateFile, t, s.opts.Now), nil
}

// loopWorkflow is the server's Temporal for one loop: its questions go
// through askWorkflow, which keeps and publishes each answer.
type loopWorkflow struct {
	s *Server
	l *loop
}

func (w loopWorkflow) Sync(ctx context.Context, stateFile string) (Workflow, error) {
	return w.s.askWorkflow(ctx, w.l)
}

func (w loopWorkflow) Pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	return w.s.opts.Temporal.Pause(ctx, stateFile, kill, reason)
}

func (w loopWorkflow) Resume(ctx context.Context, stateFile, reason string) error {
	return w.s.opts.Temporal.Resume(ctx, stateFile, reason)
}

func (w loopWorkflow) Stop(ctx context.Context, stateFile, reason string) (Workflow, error) {
	return w.s.opts.Temporal.Stop(ctx, stateFile, reason)
}

func (w loopWorkflow) Redirect(ctx context.Context, stateFile string, c engine.Change) error {
	return w.s.opts.Temporal.Redirect(ctx, stateFile, c)
}

// controlWait bounds a control's wait for its engine, as long as before
// the controller: a local engine acts between its steps; a workflow's
// workers learn of a stop at their attempts' next heartbeat, and
// aot-temporal waits up to 45s for the workflow to close.
func controlWait(k control.Kind, op string) time.Duration {
	switch {
	case op == "stop" && k == control.Temporal:
		return 60 * time.Second
	case op == "stop" || op == "redirect":
		return 10 * time.Second
	}
	return 5 * time.Second
}

// control runs op on l's controls, bounded by controlWait and by the
// request: a client that goes away ends the wait.
func (s *Server) control(r *http.Request, l *loop, op string, fn func(ctx context.Context, c control.Controller) error) error {
	c, err := s.controlsOf(r.Context(), l)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), controlWait(c.Kind(), op))
	defer cancel()
	return fn(ctx, c)
}
