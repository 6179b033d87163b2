package durable

import (
	"errors"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// A person's controls of a running loop: pause and resume are signals,
// a redirect is an Update (validated first, then applied or refused with
// the reason), the status is a query.

// errEnded refuses a redirect of a loop that has ended.
var errEnded = errors.New("the loop has ended")

func (l *loop) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) {
		return l.status(ctx), nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateRedirect,
		func(ctx workflow.Context, ch engine.Change) error { return l.redirect(ctx, ch) },
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, ch engine.Change) error {
			if l.ending {
				return errEnded
			}
			return engine.Apply(state.Clone(l.s), ch, workflow.Now(ctx))
		}})
}

// status is what the status query answers, and what the projection sends.
func (l *loop) status(ctx workflow.Context) Status {
	st := Status{State: state.Marshal(l.s), Paused: l.paused != nil, Running: []Running{}, Usage: l.usage,
		Iteration: l.s.Control.Iteration, Done: l.outcome != nil, Outcome: l.outcome}
	for _, seq := range l.seqs() {
		if t := l.tasks[seq]; !t.discarded {
			st.Running = append(st.Running, Running{Atom: t.atom, Attempt: t.n, Started: t.started})
		}
	}
	return st
}

// controls applies the pause and resume signals that have arrived.
func (l *loop) controls(ctx workflow.Context) {
	for {
		var p PauseRequest
		ok, _ := l.pauseCh.ReceiveAsyncWithMoreFlag(&p)
		if !ok {
			break
		}
		l.pause(ctx, p)
	}
	for {
		var r ResumeRequest
		ok, _ := l.resumeCh.ReceiveAsyncWithMoreFlag(&r)
		if !ok {
			break
		}
		l.resume(ctx)
	}
}

// pause holds the loop: nothing new starts; with kill the running attempts
// are cancelled (their atoms back to pending, not charged).
func (l *loop) pause(ctx workflow.Context, p PauseRequest) {
	if p.Reason == "" {
		p.Reason = "aot pause"
	}
	if l.paused == nil {
		l.paused = &pause{since: workflow.Now(ctx), reason: p.Reason}
	}
	if p.Kill && !l.paused.kill {
		l.paused.kill = true
		for _, seq := range l.seqs() {
			l.kill(l.tasks[seq], "paused: "+p.Reason)
		}
	}
	l.dirty = true
}

// resume lets a paused loop go on; the paused time is not charged to
// max_wall_time, and the sweep starts afresh.
func (l *loop) resume(ctx workflow.Context) {
	if l.paused == nil {
		return
	}
	l.pausedFor += workflow.Now(ctx).Sub(l.paused.since)
	l.paused = nil
	l.newSweep()
	l.dirty = true
}

// redirect applies a validated change: attempts whose work it invalidates
// are cancelled, the others go on; bounds and the stall window start
// afresh, as the engine's adopt.
func (l *loop) redirect(ctx workflow.Context, ch engine.Change) error {
	if l.ending {
		return errEnded
	}
	next := state.Clone(l.s)
	if err := engine.Apply(next, ch, workflow.Now(ctx)); err != nil {
		return err
	}
	all, hit := invalidated(l.s, next, l.ix)
	var kill []*attempt
	for _, seq := range l.seqs() {
		t := l.tasks[seq]
		if t.discarded {
			continue
		}
		if all || hit[t.atom] {
			kill = append(kill, t)
			continue
		}
		// Attempts that go on keep their atoms in progress.
		if a := next.Atom(t.atom); a != nil && a.Status == state.StatusPending {
			a.Status = state.StatusInProgress
		}
	}
	if ch.MaxParallelAgents != nil {
		l.in.MaxParallel = 0 // a person's bound wins over the run's flag
	}
	if ch.MaxIterations != nil {
		l.in.MaxIterations = 0
	}
	state.CopyInto(l.s, next)
	l.rebuild()
	for _, t := range kill {
		l.kill(t, "redirect: "+ch.Reason)
	}
	for id := range l.waiting {
		if all || hit[id] {
			delete(l.waiting, id)
		}
	}
	l.gen++
	l.halt = nil
	l.draining = false
	l.s.Control.StallCount = 0
	l.applyBounds()
	l.rebuild()
	l.newSweep()
	l.s.Control.PrevPendingCount = l.unresolved
	l.dirty = true
	l.wake.SendAsync(struct{}{})
	return nil
}

// invalidated compares the state before and after a change: all when the
// objective changed; otherwise the atoms removed, changed, redone or
// switched away from, with everything that depends on them.
func invalidated(before, after *state.State, ix interface{ Dependents(string) []string }) (all bool, hit map[string]bool) {
	hit = map[string]bool{}
	ob, oa := before.Objective, after.Objective
	if ob.Goal != oa.Goal || ob.BackgroundIntent != oa.BackgroundIntent || ob.Deliverables != oa.Deliverables || ob.DefinitionOfDone != oa.DefinitionOfDone {
		return true, hit
	}
	var roots []string
	for i := range before.Atoms {
		b := &before.Atoms[i]
		a := after.Atom(b.ID)
		if a == nil || a.Description != b.Description || a.ORGroup != b.ORGroup || !slices.Equal(a.DependsOn, b.DependsOn) ||
			b.Status == state.StatusResolved && a.Status != state.StatusResolved {
			roots = append(roots, b.ID)
		}
	}
	for _, g := range before.ORGroups {
		if ag := after.ORGroup(g.Name); g.Selected != "" && (ag == nil || ag.Selected != g.Selected) {
			roots = append(roots, g.Selected)
		}
	}
	for len(roots) > 0 {
		id := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if !hit[id] {
			hit[id] = true
			roots = append(roots, ix.Dependents(id)...)
		}
	}
	return false, hit
}

// project sends the state to the attached aot run after changes, at most
// every projectEvery and one at a time; best effort.
func (l *loop) project(ctx workflow.Context) {
	if l.in.ProjectionQueue == "" || !l.dirty || l.projF != nil && !l.projF.IsReady() {
		return
	}
	now := workflow.Now(ctx)
	if !l.lastProject.IsZero() && now.Before(l.lastProject.Add(projectEvery)) {
		return // the timer brings the loop back
	}
	l.projF = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, projectionOptions(l.in.ProjectionQueue)), ProjectionActivity, l.status(ctx))
	l.dirty = false
	l.lastProject = now
}
