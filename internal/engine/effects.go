package engine

import (
	"context"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/verify"
)

// The engine type makes the coordinator's decisions: which atoms run with
// which role, how results and failures count, backtracking, decomposition,
// sweeps, bounds, redirects. Whatever touches the world goes through its
// effects: a local run (Run) starts agents on goroutines, journals and
// writes the state file; the Temporal workflow (package durable, through
// Core) turns each effect into an activity or a workflow event. So both
// make the same decisions from one copy of the code, and the decisions
// themselves are deterministic: their clock is Options.Now, and nothing in
// them depends on the order of a map.
type effects interface {
	// start runs t's agent on in; its result comes back to integrate. It
	// sets t.cancel.
	start(ctx context.Context, t *task, in agent.Task)
	// drain waits, bounded, for the results of the tasks killed, and
	// integrates them.
	drain()
	// checks runs the base case on the merged work, with the judge when
	// judges is set. It blocks.
	checks(ctx context.Context, judges bool) (verify.Report, error)
	// runAgent runs one agent to its end (the base case's planner). It
	// blocks.
	runAgent(ctx context.Context, in agent.Task) (agent.Result, error, time.Duration)
	// event records a journal event.
	event(ev journal.Event)
	// flush makes the state durable: local runs write the state file.
	flush() error
	// sync makes the events recorded so far durable.
	sync() error
	// pauseMarker records the pause in force (nil: none) where other
	// processes see it.
	pauseMarker(p *PauseInfo) error
}

// local is a local run's effects.
type local struct{ e *engine }

func (l local) start(ctx context.Context, t *task, in agent.Task) {
	e := l.e
	tctx, cancel := context.WithTimeout(ctx, e.opts.AgentTimeout)
	t.cancel = cancel
	tid, id, attempt, role := t.id, t.atom, t.attempt, t.role
	tctx = agent.WithStart(tctx, func(tr proc.Tree) { e.started(tid, id, attempt, tr) })
	tctx = agent.WithActivity(tctx, func(act agent.Activity) { e.activity(tid, id, role, act) })
	// Read here, on the coordinator's goroutine, for the attempt's own.
	expect := expectsChanges(e.ix.Atom(id))
	go func() {
		start := time.Now()
		var res agent.Result
		var err error
		var tm *taskMerge
		var touched *[]string
		switch {
		case e.iso != nil && role == agent.Worker:
			tm = &taskMerge{expect: expect}
			res, err = e.isolatedRun(tctx, tid, in, tm)
		case role == agent.Worker && e.serial:
			touched = e.measureRoot(in.Workdir, func() { res, err = e.opts.Agent.Run(tctx, in) })
		default:
			res, err = e.opts.Agent.Run(tctx, in)
		}
		e.trees.remove(tid)
		if err == nil && tctx.Err() != nil {
			err = &agent.AttemptError{Reason: "cancelled; process group killed"}
		}
		cancel()
		e.results <- taskResult{id: tid, res: res, err: err, dur: time.Since(start), iso: tm, touched: touched}
	}()
}

func (l local) drain() {
	e := l.e
	deadline := time.After(10 * time.Second)
	for len(e.tasks) > 0 {
		select {
		case r := <-e.results:
			e.integrate(context.Background(), r)
		case <-deadline:
			return
		}
	}
}

func (l local) checks(ctx context.Context, judges bool) (verify.Report, error) {
	e := l.e
	var rep verify.Report
	var err error
	opts := verify.Options{Dir: e.readDir(), Timeout: e.opts.CheckTimeout, Output: e.checkOutput}
	if judges {
		opts.Judge = &judge{e: e}
	}
	e.stoppable(ctx, func(vctx context.Context) {
		rep, err = e.baseCase(vctx, opts)
	})
	return rep, err
}

func (l local) runAgent(ctx context.Context, in agent.Task) (agent.Result, error, time.Duration) {
	e := l.e
	start := time.Now()
	var res agent.Result
	var err error
	e.stoppable(ctx, func(sctx context.Context) {
		tctx, cancel := context.WithTimeout(sctx, e.opts.AgentTimeout)
		defer cancel()
		res, err = e.opts.Agent.Run(tctx, in)
	})
	return res, err, time.Since(start)
}

func (l local) event(ev journal.Event) { _ = l.e.jr.Append(ev) }
func (l local) flush() error           { return l.e.flush() }
func (l local) sync() error            { return l.e.jr.Sync() }

func (l local) pauseMarker(p *PauseInfo) error {
	if p == nil {
		return removePause(l.e.opts.StateFile)
	}
	return writePause(l.e.opts.StateFile, p)
}
