package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
)

// Loops on Temporal (aot run --engine temporal left its marker beside the
// journal): the workflow is the engine and the truth. Their state files
// follow their workflows only while an aot run is attached, so the server
// asks every such workflow itself, each TemporalEvery, and has its state
// projected into the state file; a person's controls go to the workflow.

// TemporalLoops reaches the workflow of a loop that runs on Temporal, named
// by its state file. The CLI provides it: the Temporal SDK is no part of
// the server.
type TemporalLoops interface {
	// Sync asks the workflow where it stands and projects its state into
	// the state file.
	Sync(ctx context.Context, stateFile string) (Workflow, error)
	// Pause and Resume signal the workflow; it acts on them at its next
	// task.
	Pause(ctx context.Context, stateFile string, kill bool, reason string) error
	Resume(ctx context.Context, stateFile, reason string) error
	// Stop cancels the workflow: it kills its running attempts and ends.
	Stop(ctx context.Context, stateFile, reason string) error
	// Redirect returns once the workflow has applied the change; a change
	// it refused is an *engine.RefusedError.
	Redirect(ctx context.Context, stateFile string, c engine.Change) error
}

// Workflow is what a loop's workflow answered.
type Workflow struct {
	ID      string
	Running bool // it has not ended
	Paused  bool
	// PausedSince and PausedKill describe the pause in force (nil: the
	// workflow did not say).
	PausedSince *time.Time
	PausedKill  bool
	Attempts    []WorkflowAttempt // in flight
}

// WorkflowAttempt is an agent attempt the workflow waits for.
type WorkflowAttempt struct {
	Atom    string
	Attempt int
	Started time.Time
}

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

// controls are a person's controls of a loop: the local engine's (through
// the files it watches) or, for a loop on Temporal, its workflow's.
type controls interface {
	pause(kill bool, reason string) error
	resume(reason string) error
	stop(reason string) (engine.StopResult, error)
	redirect(c engine.Change) (engine.RedirectResult, error)
}

// controlsOf picks l's controls. A loop on Temporal whose workflow runs is
// steered through its workflow, asked first so that what the answer says
// is fresh. One whose workflow has ended has no engine: the local controls
// act on its state file, from which the next aot run --engine temporal
// starts.
func (s *Server) controlsOf(ctx context.Context, l *loop) (controls, error) {
	// A state that cannot be read is said as such, before any engine is
	// bothered with it.
	if _, err := l.read(); err != nil {
		return nil, err
	}
	local := localControls{stateFile: l.stateFile, now: s.opts.Now}
	if s.opts.Temporal == nil || !s.workflowDue(l) {
		return local, nil
	}
	wf, err := s.askWorkflow(ctx, l)
	if err != nil {
		return nil, fmt.Errorf("the loop runs on Temporal and its workflow could not be asked: %w", err)
	}
	if !wf.Running {
		return local, nil
	}
	return &workflowControls{s: s, l: l, ctx: ctx, last: wf}, nil
}

type localControls struct {
	stateFile string
	now       func() time.Time
}

func (c localControls) pause(kill bool, reason string) error {
	return engine.Pause(c.stateFile, kill, reason, 5*time.Second)
}

func (c localControls) resume(reason string) error {
	return engine.Resume(c.stateFile, reason, 5*time.Second)
}

func (c localControls) stop(reason string) (engine.StopResult, error) {
	return engine.Stop(c.stateFile, reason, 10*time.Second)
}

func (c localControls) redirect(ch engine.Change) (engine.RedirectResult, error) {
	return engine.Redirect(c.stateFile, ch, c.now(), 10*time.Second)
}

// workflowControls steer a loop's running workflow. Each waits, as the
// local engine's controls do, until the workflow has acted: a signal or a
// cancel is recorded at once, acted on at the workflow's next task.
type workflowControls struct {
	s    *Server
	l    *loop
	ctx  context.Context
	last Workflow // the answer controlsOf got
}

func (c *workflowControls) pause(kill bool, reason string) error {
	if err := c.s.opts.Temporal.Pause(c.ctx, c.l.stateFile, kill, reason); err != nil {
		return err
	}
	return c.await("paused", 5*time.Second, func(wf Workflow) bool { return wf.Paused || !wf.Running })
}

func (c *workflowControls) resume(reason string) error {
	if !c.last.Paused {
		return engine.ErrNotPaused
	}
	if err := c.s.opts.Temporal.Resume(c.ctx, c.l.stateFile, reason); err != nil {
		return err
	}
	return c.await("resumed", 5*time.Second, func(wf Workflow) bool { return !wf.Paused })
}

// stop waits longer than a local stop: the workers learn of the cancel at
// their attempts' next heartbeat.
func (c *workflowControls) stop(reason string) (engine.StopResult, error) {
	if err := c.s.opts.Temporal.Stop(c.ctx, c.l.stateFile, reason); err != nil {
		return engine.StopResult{}, err
	}
	if err := c.await("ended", 30*time.Second, func(wf Workflow) bool { return !wf.Running }); err != nil {
		return engine.StopResult{}, err
	}
	st, err := c.l.read()
	if err != nil {
		return engine.StopResult{}, err
	}
	res := engine.StopResult{Status: st.Control.Status}
	if st.Control.StopReason != nil {
		res.Reason = *st.Control.StopReason
	}
	return res, nil
}

// redirect reports the corrections the workflow recorded, as the local
// engine's does: those the state file has after the change and did not
// before (both fresh from the workflow).
func (c *workflowControls) redirect(ch engine.Change) (engine.RedirectResult, error) {
	res := engine.RedirectResult{AppliedBy: "engine", Corrections: []string{}}
	before, err := c.l.read()
	if err != nil {
		return res, err
	}
	if err := c.s.opts.Temporal.Redirect(c.ctx, c.l.stateFile, ch); err != nil {
		return res, err
	}
	if _, err := c.s.askWorkflow(c.ctx, c.l); err != nil {
		return res, nil // applied; the corrections show once the workflow answers
	}
	after, err := c.l.read()
	if err != nil {
		return res, nil
	}
	for _, corr := range after.Corrections[min(len(before.Corrections), len(after.Corrections)):] {
		res.Corrections = append(res.Corrections, corr.Type)
	}
	return res, nil
}

// await asks the workflow until cond holds, for at most within.
func (c *workflowControls) await(what string, within time.Duration, cond func(Workflow) bool) error {
	deadline := time.Now().Add(within)
	for {
		wf, err := c.s.askWorkflow(c.ctx, c.l)
		if err == nil && cond(wf) {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the request was sent to the loop's Temporal workflow, which has not answered since: %w", err)
			}
			return fmt.Errorf("the loop's Temporal workflow %s has not %s within %s; the request stays with it", wf.ID, what, within)
		}
		select {
		case <-c.ctx.Done():
			return c.ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
