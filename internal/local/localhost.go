package local

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
	"github.com/aot-loop/aot/internal/workspace"
)

// localHost is a local run's Host: agents on goroutines in this process,
// the journal and the state file on disk. It drives its Core through the
// Core's public steps.
type localHost struct {
	c        *engine.Core // the kernel it drives, from begin on
	s        *state.State // the state before the Core has it (begin)
	opts     Options
	start    time.Time                  // when the run started
	lastBeat time.Time                  // the last heartbeat
	cancels  map[int]context.CancelFunc // by attempt id, until its result is taken

	store       *state.Store
	jr          *journal.Journal
	results     chan result // attempts' ends, from their goroutines
	sayMu       sync.Mutex  // progress lines come from attempts' goroutines too
	lastFlush   time.Time
	stamp       fileStamp
	place       placeStamp            // the project folder the run started in (moved.go)
	lastWritten *state.State          // what the run last wrote to the state file
	trees       treeSet               // process trees of the attempts in flight
	iso         *isolation            // nil: agents share the project root
	serial      bool                  // no isolation: workers one at a time (measured in the project root)
	integration string                // the integration worktree, with isolation
	denied      perTask[agent.Denial] // the tool calls each attempt's CLI refused, as they happen
	retried     perTask[string]       // the model calls each attempt's CLI retried
}

// result is an attempt's end, as its goroutine hands it to the loop.
type result struct {
	id  int
	res agent.Result
	err error
	dur time.Duration
	iso *attemptMerge // what isolation did with a worker attempt
	// touched are the files a worker attempt in the project root changed
	// (nil: not measured, or isolated).
	touched *[]string
}

// attemptMerge is what isolation did with a worker attempt: its worktree
// and branch, and its merge.
type attemptMerge struct {
	attempt workspace.Attempt
	merge   *workspace.Merge
	kept    bool
	expect  bool // the atom expects its worker to change files (expect_changes)
}

func (l *localHost) Now() time.Time { return l.opts.Now() }

func (l *localHost) Event(ev journal.Event) { _ = l.jr.Append(ev) }

// Say writes a line to Options.Progress; attempts' goroutines say too.
func (l *localHost) Say(line string) {
	if l.opts.Progress == nil {
		return
	}
	l.sayMu.Lock()
	defer l.sayMu.Unlock()
	io.WriteString(l.opts.Progress, line+"\n")
}

func (l *localHost) Start(ctx context.Context, a engine.Attempt) {
	tctx, cancel := context.WithTimeout(ctx, l.opts.AgentTimeout)
	l.cancels[a.ID] = cancel
	tid, id, attempt, role, in := a.ID, a.Atom, a.N, a.Role, a.Task
	tctx = agent.WithStart(tctx, func(tr proc.Tree) { l.started(tid, id, attempt, tr) })
	tctx = agent.WithActivity(tctx, func(act agent.Activity) { l.activity(tid, id, role, act) })
	// Read here, on the coordinator's goroutine, for the attempt's own.
	expect := engine.ExpectsChanges(l.c.Atom(id))
	go func() {
		start := time.Now()
		var res agent.Result
		var err error
		var tm *attemptMerge
		var touched *[]string
		switch {
		case l.iso != nil && role == agent.Worker:
			tm = &attemptMerge{expect: expect}
			res, err = l.isolatedRun(tctx, tid, in, tm)
		case role == agent.Worker && l.serial:
			touched = l.measureRoot(in.Workdir, func() { res, err = l.opts.Agent.Run(tctx, in) })
		default:
			res, err = l.opts.Agent.Run(tctx, in)
		}
		l.trees.remove(tid)
		if err == nil && tctx.Err() != nil {
			err = &agent.AttemptError{Reason: "cancelled; process group killed"}
		}
		cancel()
		l.results <- result{id: tid, res: res, err: err, dur: time.Since(start), iso: tm, touched: touched}
	}()
}

func (l *localHost) Cancel(id int) {
	if cancel := l.cancels[id]; cancel != nil {
		cancel()
	}
}

// took forgets the cancel function of an attempt whose result arrived,
// and gives its end as Core.Finish takes it.
func (l *localHost) took(r result) engine.Finished {
	delete(l.cancels, r.id)
	f := engine.Finished{Result: r.res, Err: r.err, Dur: r.dur, Touched: r.touched, Refused: l.denied.take(r.id), Retried: l.retried.take(r.id)}
	if tm := r.iso; tm != nil {
		f.Merge, f.Branch, f.Worktree, f.Dir = tm.merge, tm.attempt.Branch, tm.attempt.Path, tm.attempt.Dir
	}
	return f
}

// activity shows a running agent's tool call as a progress line:
// "A3 Bash: go test ./...". It runs on the attempt's goroutine.
func (l *localHost) activity(id int, atom string, role agent.Role, a agent.Activity) {
	who := atom
	if role != agent.Worker {
		who = atom + " (" + string(role) + ")"
	}
	if a.Refused {
		l.denied.add(id, agent.Denial{Tool: a.Tool, Path: a.Detail, Why: a.Why})
		l.say("%s %s refused: %s", who, a.Tool, dag.OneLine(strings.TrimPrefix(a.Detail+": "+a.Why, ": "), 160))
		return
	}
	if a.Retry {
		l.retried.add(id, a.Detail)
		l.say("%s: %s", who, dag.OneLine(a.Detail, 160))
		return
	}
	if a.Tool == "" {
		l.say("%s: %s", who, dag.OneLine(a.Detail, 100))
		return
	}
	l.say("%s %s: %s", who, a.Tool, dag.OneLine(a.Detail, 100))
}

// heartbeat tells a person which atoms are running and for how long.
func (l *localHost) heartbeat() {
	c := l.c
	if l.opts.Progress == nil || c.InFlight() == 0 || l.Now().Sub(l.lastBeat) < l.opts.Heartbeat {
		return
	}
	l.lastBeat = l.Now()
	var parts []string
	for _, a := range c.Running() {
		parts = append(parts, fmt.Sprintf("%s %s for %s", a.Role, a.Atom, l.Now().Sub(a.Started).Round(time.Second)))
	}
	l.say("running: %s", strings.Join(parts, ", "))
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

// readDir is where probes, planners, judges and the verifier look: the
// merged work so far.
func (l *localHost) readDir() string {
	if l.integration != "" {
		return l.integration
	}
	return l.opts.Workdir
}

func (l *localHost) Checks(ctx context.Context, judges bool) (verify.Report, error) {
	var rep verify.Report
	var err error
	s := l.c.State()
	opts := verify.Options{Dir: l.readDir(), Timeout: l.opts.CheckTimeout, Output: l.checkOutput}
	var j *judge
	if judges {
		j = &judge{agent: l.opts.Agent, timeout: l.opts.AgentTimeout, dir: l.readDir(), stateFile: l.opts.StateFile,
			objective: &s.Objective, confirmFn: l.opts.Confirm, record: l.c.Event, say: l.c.Say}
		opts.Judge = j
	}
	l.stoppable(ctx, func(vctx context.Context) {
		rep, err = baseCase(vctx, s.Objective.BaseCase, opts)
	})
	if j != nil {
		l.c.Spent(j.usage, j.unknown)
	}
	return rep, err
}

func (l *localHost) RunAgent(ctx context.Context, in agent.Task) (agent.Result, error, time.Duration) {
	start := time.Now()
	var res agent.Result
	var err error
	l.stoppable(ctx, func(sctx context.Context) {
		tctx, cancel := context.WithTimeout(sctx, l.opts.AgentTimeout)
		defer cancel()
		res, err = l.opts.Agent.Run(tctx, in)
	})
	return res, err, time.Since(start)
}

func (l *localHost) Sync() error  { return l.jr.Sync() }
func (l *localHost) Flush() error { return l.flush() }

func (l *localHost) ShowPause(p *engine.PauseInfo) error {
	if p == nil {
		return removePause(l.opts.StateFile)
	}
	return writePause(l.opts.StateFile, p)
}
