package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// Run runs the loop of the state file until it halts. An error means the
// run could not start or hit an I/O failure; a halt of the loop itself is an
// Outcome with its Reason.
func Run(ctx context.Context, opts Options) (Outcome, error) {
	if opts.Agent == nil {
		return Outcome{}, errors.New("no agent configured")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AgentTimeout <= 0 {
		opts.AgentTimeout = DefaultAgentTimeout
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = verify.DefaultTimeout
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 100 * time.Millisecond
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = 500 * time.Millisecond
	}
	// Agents get the state file by an absolute path (task.state_file,
	// AOT_STATE_FILE): they run in the project root, not where aot started.
	if abs, err := filepath.Abs(opts.StateFile); err == nil {
		opts.StateFile = abs
	}
	if opts.Workdir == "" {
		opts.Workdir = ProjectRoot(opts.StateFile)
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 30 * time.Second
	}
	lock, err := runlock.Acquire(opts.StateFile)
	if err != nil {
		return Outcome{}, err
	}
	defer lock.Release()

	lh := &localHost{now: opts.Now, cancels: map[int]context.CancelFunc{},
		store: state.NewStore(opts.StateFile), results: make(chan taskResult, 64)}
	e := newEngine(opts, lh)
	lh.e, lh.c = e, &Core{e: e}
	lh.store.Guard(func() error {
		if lh.stamp.fi != nil && !stampOf(opts.StateFile).equal(lh.stamp) {
			return errChangedBehind
		}
		return nil
	})
	if err := lh.begin(); err != nil {
		if lh.jr != nil {
			_ = lh.jr.Close()
		}
		return Outcome{}, err
	}
	out := lh.loop(confine.With(ctx, opts.Guard))
	if err := lh.finish(&out); err != nil {
		return out, err
	}
	return out, nil
}

// activity shows a running agent's tool call as a progress line:
// "A3 Bash: go test ./...". It runs on the attempt's goroutine.
func (l *localHost) activity(id int, atom string, role agent.Role, a agent.Activity) {
	e := l.e
	who := atom
	if role != agent.Worker {
		who = atom + " (" + string(role) + ")"
	}
	if a.Refused {
		l.denied.add(id, agent.Denial{Tool: a.Tool, Path: a.Detail, Why: a.Why})
		e.say("%s %s refused: %s", who, a.Tool, dag.OneLine(strings.TrimPrefix(a.Detail+": "+a.Why, ": "), 160))
		return
	}
	if a.Retry {
		l.retried.add(id, a.Detail)
		e.say("%s: %s", who, dag.OneLine(a.Detail, 160))
		return
	}
	if a.Tool == "" {
		e.say("%s: %s", who, dag.OneLine(a.Detail, 100))
		return
	}
	e.say("%s %s: %s", who, a.Tool, dag.OneLine(a.Detail, 100))
}

// begin reads the state, checks that it can run, recovers from a crash and
// marks the loop running.
func (l *localHost) begin() error {
	e := l.e
	s, err := l.store.Read()
	if err != nil {
		return err
	}
	if missing := s.Missing(); len(missing) > 0 {
		return &NotReadyError{Missing: missing}
	}
	// The loop's own name, written before anything is named after it.
	if s, err = EnsureLoopID(l.store, s); err != nil {
		return err
	}
	_, gone := os.Stat(journal.PathFor(e.opts.StateFile))
	jr, err := journal.Open(journal.PathFor(e.opts.StateFile))
	if err != nil {
		return err
	}
	jr.OnLost = func(why string) { e.say("%s", why) }
	l.jr = jr
	e.s = s
	if errors.Is(gone, os.ErrNotExist) && (s.Control.Iteration > 0 || s.Control.Status != state.ControlPending) {
		// Deleted between runs: nothing holds it any more. Said, so that
		// nobody takes the budgets' zero for the loop's spend.
		why := fmt.Sprintf("no journal at %s although the loop has run (iteration %d): its spend so far is unknown, and the budgets count from 0", journal.PathFor(e.opts.StateFile), s.Control.Iteration)
		e.event(journal.Event{Type: journal.JournalLost, Reason: why})
		e.say("%s", why)
	}
	l.place = stampPlace(e.opts.StateFile)
	// What the previous run journaled since its last write of the state
	// file, read once: its agents still alive, its spend, its results.
	// A journal that cannot be read is an error: a run that started from
	// it would forget the loop's spend and the processes it must kill.
	cp, after, err := journal.ReadFromCheckpoint(journal.PathFor(e.opts.StateFile))
	if err != nil {
		return fmt.Errorf("read the journal: %w", err)
	}
	l.killSurvivors(cp, after)
	if e.isoCap, err = l.openIsolation(context.Background()); err != nil {
		return err
	}
	if err := l.loadUsage(cp, after); err != nil {
		return err
	}
	replayed := l.replay(after)
	replayed += l.adoptMerges(context.Background())
	e.startRun(&replayed)
	e.clearPause()
	e.applyBounds()
	e.dirty = true
	e.rebuild()
	if err := l.flush(); err != nil {
		return err
	}
	e.newSweep()
	if e.serial {
		e.say("running: %d atoms, %d unresolved, one worker at a time (up to %d when their declared scopes are disjoint)", len(s.Atoms), dag.Unresolved(s), e.parallel)
	} else {
		e.say("running: %d atoms, %d unresolved, up to %s at once", len(s.Atoms), dag.Unresolved(s), brief.Count(e.parallel, "agent"))
	}
	return nil
}

// loop is the coordinator: schedule, wait, integrate, evaluate, until a bound.
func (lh *localHost) loop(ctx context.Context) Outcome {
	e, c := lh.e, lh.c
	tick := time.NewTicker(e.opts.PollInterval)
	defer tick.Stop()
	for {
		if out, done := c.Bounds(); done {
			return c.GiveUp(ctx, out)
		}
		c.Schedule(ctx)
		if c.Quiet() {
			if out, done := c.Settle(ctx); done {
				return out
			}
			continue
		}
		select {
		case r := <-lh.results:
			c.Finish(ctx, r.id, lh.took(r))
			for more := true; more; {
				select {
				case r := <-lh.results:
					c.Finish(ctx, r.id, lh.took(r))
				default:
					more = false
				}
			}
			if out, done := c.AfterFinish(ctx); done {
				return out
			}
			// Refill the freed slots first, then make the batch durable:
			// the fsync overlaps with the agents' work instead of delaying it.
			out, done := c.Bounds()
			if !done {
				c.Schedule(ctx)
			}
			if err := lh.Sync(); err != nil {
				return c.Fail(err)
			}
			if done {
				return c.GiveUp(ctx, out)
			}
		case <-tick.C:
			if err := lh.poll(ctx); err != nil {
				return c.Fail(err)
			}
			lh.heartbeat(c)
		case <-ctx.Done():
			c.Stop(interruption(ctx))
		}
		if out, stopped := c.Stopped(); stopped {
			return out
		}
		if c.Dirty() && (c.Urgent() || lh.Now().Sub(lh.lastFlush) >= e.opts.FlushInterval) {
			if err := lh.Flush(); err != nil {
				return c.Fail(err)
			}
		}
	}
}

// interruption names what interrupted the run: the signal when the CLI
// cancelled with one as the cause.
func interruption(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded) {
		return "interrupted: " + c.Error()
	}
	return "interrupted (Ctrl-C or a signal)"
}

// stoppable runs a step that blocks the loop (verification, planning) with
// a context that a stop request cancels, so aot stop works there too.
func (l *localHost) stoppable(ctx context.Context, fn func(context.Context)) {
	e := l.e
	sctx, cancel := context.WithCancel(ctx)
	stopped := make(chan string, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		l.watchStop(sctx, cancel, stopped)
	}()
	fn(sctx)
	cancel()
	<-watched
	select {
	case r := <-stopped:
		e.stop = &r
	default:
	}
}

// watchStop cancels a blocking step when a stop is requested meanwhile.
func (l *localHost) watchStop(ctx context.Context, cancel context.CancelFunc, stopped chan<- string) {
	e := l.e
	t := time.NewTicker(e.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s, err := l.store.Read(); err == nil && s.Control.StopRequested {
				stopped <- nonBlank(deref(s.Control.StopReason), "aot stop")
				cancel()
				return
			}
		}
	}
}

// poll looks for a stop in the state file and for redirect requests.
func (l *localHost) poll(ctx context.Context) error {
	e := l.e
	if !stampOf(e.opts.StateFile).equal(l.stamp) {
		if err := l.external(); err != nil {
			return err
		}
	}
	if l.jr != nil {
		if err := l.jr.Verify(); err != nil {
			return err
		}
	}
	reqs, err := pendingRequests(e.opts.StateFile)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if r.bad != nil {
			answer(r, r.bad)
			continue
		}
		if r.control != "" {
			e.control(r)
			continue
		}
		e.redirect(r)
	}
	return nil
}

// finish kills what still runs, records the stop in the state and the
// journal, and writes both.
func (l *localHost) finish(out *Outcome) error {
	e := l.e
	if e.halt != nil && out.Reason == "" {
		*out = e.outcome(e.halt.Reason, e.halt.Message)
	}
	e.killAll("the loop stopped: " + string(out.Reason))
	if e.book.Paused != nil {
		e.book.Paused = nil
		_ = os.Remove(pausePath(e.opts.StateFile))
	}
	e.conclude(out, l.land(context.Background(), out))
	err := l.flush()
	if cerr := l.jr.Close(); err == nil {
		err = cerr
	}
	e.say("halted: %s: %s", out.Reason, out.Message)
	if err != nil {
		return err
	}
	return nil
}

// replay re-applies worker results that reached the journal but not the
// state file before a crash: every successful worker finish after the last
// checkpoint whose atom is not resolved yet. It returns how many it applied.
func (l *localHost) replay(events []journal.Event) int {
	e := l.e
	n := 0
	for _, ev := range events {
		if ev.Type != journal.AtomFinish || ev.Role != string(agent.Worker) || ev.OK == nil || !*ev.OK {
			continue
		}
		a := e.s.Atom(ev.Atom)
		if a == nil || a.Status == state.StatusResolved {
			continue
		}
		d := journal.DataOf[journal.AtomFinishData](ev)
		a.Status = state.StatusResolved
		var arts []string // none is nil, as the binding always had it
		if len(d.Artifacts) > 0 {
			arts = d.Artifacts
		}
		_ = dag.Bind(e.s, a.ID, nonBlank(d.Summary, "resolved by the worker"), arts)
		e.event(journal.Event{Atom: a.ID, Role: ev.Role, OK: journal.Bool(true)}.With(d).Replayed())
		n++
	}
	if n > 0 {
		dag.ResolveParents(e.s)
	}
	return n
}

// loadUsage sets the loop's totals from the journal: the last checkpoint's
// totals plus every finished attempt after it, summed as the engine sums
// them (saturating; a negative or non-finite number counts as nothing). A
// journal written before checkpoints carried totals is summed whole.
func (l *localHost) loadUsage(cp *journal.Event, after []journal.Event) error {
	e := l.e
	if cp != nil {
		if journal.DataOf[journal.CheckpointData](*cp).InputTokens == nil {
			// An older journal: no totals in its checkpoints.
			all, err := journal.Read(journal.PathFor(e.opts.StateFile))
			if err != nil {
				return fmt.Errorf("read the journal: %w", err)
			}
			cp, after = nil, all
		}
	}
	if cp != nil {
		d := journal.DataOf[journal.CheckpointData](*cp)
		e.book.Usage = agent.Usage{
			InputTokens:  int64(*d.InputTokens),
			OutputTokens: int64(d.OutputTokens),
			CostUSD:      agent.AddCost(0, d.CostUSD),
		}
		e.book.Unknown = int(d.UsageUnknown)
	}
	for _, ev := range after {
		if ev.Type != journal.AtomFinish || ev.IsReplayed() {
			continue
		}
		d := journal.DataOf[journal.AtomFinishData](ev)
		if d.UsageUnknown {
			e.book.Unknown++
		}
		in, out := d.Tokens()
		u := agent.Usage{InputTokens: in, OutputTokens: out, CostUSD: ev.CostUSD}
		if u.Tokens() == 0 {
			u.InputTokens = ev.Tokens // only the total was journaled
		}
		e.book.Usage = e.book.Usage.Plus(u)
	}
	return nil
}
