package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// localHost is a local run's Host: agents on goroutines in this process,
// the journal and the state file on disk.
type localHost struct {
	e        *engine
	c        *Core                      // the steps it drives e through
	now      func() time.Time           // Options.Now
	lastBeat time.Time                  // the last heartbeat
	cancels  map[int]context.CancelFunc // by attempt id, until its result is taken

	store       *state.Store
	jr          *journal.Journal
	results     chan taskResult // attempts' ends, from their goroutines
	sayMu       sync.Mutex      // progress lines come from attempts' goroutines too
	lastFlush   time.Time
	stamp       fileStamp
	place       placeStamp            // the project folder the run started in (moved.go)
	lastWritten *state.State          // what the run last wrote to the state file
	trees       treeSet               // process trees of the attempts in flight
	iso         *isolation            // nil: agents share the project root
	denied      perTask[agent.Denial] // the tool calls each attempt's CLI refused, as they happen
	retried     perTask[string]       // the model calls each attempt's CLI retried
}

func (l *localHost) Now() time.Time { return l.now() }

func (l *localHost) Event(ev journal.Event) { _ = l.jr.Append(ev) }

// Say writes a line to Options.Progress; attempts' goroutines say too.
func (l *localHost) Say(line string) {
	if l.e.opts.Progress == nil {
		return
	}
	l.sayMu.Lock()
	defer l.sayMu.Unlock()
	io.WriteString(l.e.opts.Progress, line+"\n")
}

func (l *localHost) Start(ctx context.Context, a Attempt) {
	e := l.e
	tctx, cancel := context.WithTimeout(ctx, e.opts.AgentTimeout)
	l.cancels[a.ID] = cancel
	tid, id, attempt, role, in := a.ID, a.Atom, a.N, a.Role, a.Task
	tctx = agent.WithStart(tctx, func(tr proc.Tree) { l.started(tid, id, attempt, tr) })
	tctx = agent.WithActivity(tctx, func(act agent.Activity) { l.activity(tid, id, role, act) })
	// Read here, on the coordinator's goroutine, for the attempt's own.
	expect := expectsChanges(e.ix.Atom(id))
	go func() {
		start := time.Now()
		var res agent.Result
		var err error
		var tm *taskMerge
		var touched *[]string
		switch {
		case l.iso != nil && role == agent.Worker:
			tm = &taskMerge{expect: expect}
			res, err = l.isolatedRun(tctx, tid, in, tm)
		case role == agent.Worker && e.serial:
			touched = l.measureRoot(in.Workdir, func() { res, err = e.opts.Agent.Run(tctx, in) })
		default:
			res, err = e.opts.Agent.Run(tctx, in)
		}
		l.trees.remove(tid)
		if err == nil && tctx.Err() != nil {
			err = &agent.AttemptError{Reason: "cancelled; process group killed"}
		}
		cancel()
		l.results <- taskResult{id: tid, res: res, err: err, dur: time.Since(start), iso: tm, touched: touched}
	}()
}

func (l *localHost) Cancel(id int) {
	if cancel := l.cancels[id]; cancel != nil {
		cancel()
	}
}

// took forgets the cancel function of an attempt whose result arrived,
// and gives its end as Core.Finish takes it.
func (l *localHost) took(r taskResult) Finished {
	delete(l.cancels, r.id)
	f := Finished{Result: r.res, Err: r.err, Dur: r.dur, Touched: r.touched, Refused: l.denied.take(r.id), Retried: l.retried.take(r.id)}
	if tm := r.iso; tm != nil {
		f.Merge, f.Branch, f.Worktree, f.Dir = tm.merge, tm.attempt.Branch, tm.attempt.Path, tm.attempt.Dir
	}
	return f
}

// heartbeat tells a person which atoms are running and for how long.
func (l *localHost) heartbeat(c *Core) {
	e := l.e
	if e.opts.Progress == nil || c.InFlight() == 0 || l.Now().Sub(l.lastBeat) < e.opts.Heartbeat {
		return
	}
	l.lastBeat = l.Now()
	var parts []string
	for _, a := range c.Running() {
		parts = append(parts, fmt.Sprintf("%s %s for %s", a.Role, a.Atom, l.Now().Sub(a.Started).Round(time.Second)))
	}
	e.say("running: %s", strings.Join(parts, ", "))
}

func (l *localHost) Drain(ctx context.Context) {
	deadline := time.After(10 * time.Second)
	for l.c.InFlight() > 0 {
		select {
		case r := <-l.results:
			l.c.Finish(ctx, r.id, l.took(r))
		case <-deadline:
			return
		}
	}
}

func (l *localHost) Checks(ctx context.Context, judges bool) (verify.Report, error) {
	e := l.e
	var rep verify.Report
	var err error
	opts := verify.Options{Dir: e.readDir(), Timeout: e.opts.CheckTimeout, Output: l.checkOutput}
	var j *judge
	if judges {
		j = &judge{agent: e.opts.Agent, timeout: e.opts.AgentTimeout, dir: e.readDir(), stateFile: e.opts.StateFile,
			objective: &e.s.Objective, confirmFn: e.opts.Confirm, record: e.event, say: e.say}
		opts.Judge = j
	}
	l.stoppable(ctx, func(vctx context.Context) {
		rep, err = baseCase(vctx, e.s.Objective.BaseCase, opts)
	})
	if j != nil {
		l.c.Spent(j.usage, j.unknown)
	}
	return rep, err
}

func (l *localHost) RunAgent(ctx context.Context, in agent.Task) (agent.Result, error, time.Duration) {
	e := l.e
	start := time.Now()
	var res agent.Result
	var err error
	l.stoppable(ctx, func(sctx context.Context) {
		tctx, cancel := context.WithTimeout(sctx, e.opts.AgentTimeout)
		defer cancel()
		res, err = e.opts.Agent.Run(tctx, in)
	})
	return res, err, time.Since(start)
}

func (l *localHost) Sync() error  { return l.jr.Sync() }
func (l *localHost) Flush() error { return l.flush() }

func (l *localHost) ShowPause(p *PauseInfo) error {
	if p == nil {
		return removePause(l.e.opts.StateFile)
	}
	return writePause(l.e.opts.StateFile, p)
}
