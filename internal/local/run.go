// Package local is the local driver of the loop's decision kernel
// (package engine): it runs a loop on this machine. Its agents run on
// goroutines of this process; it holds the run lock, keeps the state in
// memory, appends every transition to the journal (its write-ahead log)
// and syncs it before the state file is written, which follows at most
// FlushInterval behind and on every stop. It notices hand edits of the
// state file, gives each worker attempt its git worktree, and kills the
// process trees a crashed run left. After a crash the next run replays the
// journal's results since the last checkpoint, so no resolved atom is
// redone. The controls a person has over a local loop (Stop, Redirect,
// Pause, Resume) reach it through the state file and request files.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// Options configure one local run: the run's settings, and how this
// driver runs it.
type Options struct {
	// Settings are the run's own choices (aot run's flags).
	engine.Settings
	StateFile     string
	Agent         agent.Agent
	Workdir       string        // where agents and checks run; default: the project root of StateFile
	PollInterval  time.Duration // how often stop and redirect requests are looked for; default 100ms
	FlushInterval time.Duration // how far the state file may lag the journal; default 500ms
	Progress      io.Writer     // live progress for people; nil = quiet
	Heartbeat     time.Duration // how often Progress lists the running atoms; default 30s
	// RetryBackoff is the wait before a failed atom's first retry; it doubles
	// with each further failure up to MaxBackoff. Defaults
	// engine.DefaultRetryBackoff and engine.DefaultMaxBackoff.
	RetryBackoff time.Duration
	MaxBackoff   time.Duration
	// WorktreeDir is where the attempts' worktrees live, one folder per
	// loop; default workspace.DefaultDir, in the user's cache folder.
	WorktreeDir string
	// Agents names each role's agent (role -> "claude (model sonnet)"),
	// journaled when the run starts so that aot status can show it.
	Agents map[string]string
	// Confirm, when set, asks a person at completion whether an assertion
	// check the judge passed holds (a terminal is attached). Unset, judged
	// assertions are recorded as unconfirmed.
	Confirm func(ctx context.Context, item, evidence string) (bool, error)
	// Guard, when set, starts every agent attempt under a guard that kills
	// its tree should the run die and, if it says so, confines its writes;
	// its status is journaled when the run starts.
	Guard *confine.Guard
	// Now is the run's clock (default time.Now); the kernel reads it
	// through its Host.
	Now func() time.Time
}

// Run runs the loop of the state file until it halts. An error means the
// run could not start or hit an I/O failure; a halt of the loop itself is an
// Outcome with its Reason.
func Run(ctx context.Context, opts Options) (engine.Outcome, error) {
	if opts.Agent == nil {
		return engine.Outcome{}, errors.New("no agent configured")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AgentTimeout <= 0 {
		opts.AgentTimeout = engine.DefaultAgentTimeout
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
		opts.Workdir = engine.ProjectRoot(opts.StateFile)
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 30 * time.Second
	}
	lock, err := runlock.Acquire(opts.StateFile)
	if err != nil {
		return engine.Outcome{}, err
	}
	defer lock.Release()

	lh := &localHost{opts: opts, start: opts.Now(), cancels: map[int]context.CancelFunc{},
		store: state.NewStore(opts.StateFile), results: make(chan result, 64)}
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
		return engine.Outcome{}, err
	}
	out := lh.loop(confine.With(ctx, opts.Guard))
	if err := lh.finish(&out); err != nil {
		return out, err
	}
	return out, nil
}

// begin reads the state, checks that it can run, recovers from a crash,
// and starts the kernel on it, which marks the loop running.
func (l *localHost) begin() error {
	s, err := l.store.Read()
	if err != nil {
		return err
	}
	if missing := s.Missing(); len(missing) > 0 {
		return &engine.NotReadyError{Missing: missing}
	}
	// The loop's own name, written before anything is named after it.
	if s, err = EnsureLoopID(l.store, s); err != nil {
		return err
	}
	path := journal.PathFor(l.opts.StateFile)
	_, gone := os.Stat(path)
	jr, err := journal.Open(path)
	if err != nil {
		return err
	}
	jr.OnLost = func(why string) { l.say("%s", why) }
	l.jr = jr
	l.s = s
	if errors.Is(gone, os.ErrNotExist) && (s.Control.Iteration > 0 || s.Control.Status != state.ControlPending) {
		// Deleted between runs: nothing holds it any more. Said, so that
		// nobody takes the budgets' zero for the loop's spend.
		why := fmt.Sprintf("no journal at %s although the loop has run (iteration %d): its spend so far is unknown, and the budgets count from 0", path, s.Control.Iteration)
		l.event(journal.Event{Type: journal.JournalLost, Reason: why})
		l.say("%s", why)
	}
	l.place = stampPlace(l.opts.StateFile)
	// What the previous run journaled since its last write of the state
	// file, read once: its agents still alive, its spend, its results.
	// A journal that cannot be read is an error: a run that started from
	// it would forget the loop's spend and the processes it must kill.
	cp, after, err := journal.ReadFromCheckpoint(path)
	if err != nil {
		return fmt.Errorf("read the journal: %w", err)
	}
	l.killSurvivors(cp, after)
	iso, err := l.openIsolation(context.Background())
	if err != nil {
		return err
	}
	spent, unknown, err := l.loadUsage(cp, after)
	if err != nil {
		return err
	}
	replayed := l.replay(after)
	replayed += l.adoptMerges(context.Background())
	co := engine.CoreOptions{
		Settings:     l.opts.Settings,
		RetryBackoff: l.opts.RetryBackoff, MaxBackoff: l.opts.MaxBackoff,
		Workdir: l.opts.Workdir, StateFile: l.opts.StateFile, Agents: l.opts.Agents,
		Replayed: &replayed, Spent: spent, Unknown: unknown, Start: l.start,
		Serial: iso.serial, Integration: iso.integration,
	}
	if g := l.opts.Guard; g != nil {
		co.Confinement = &g.Status
	}
	l.c = engine.NewCore(s, co, l)
	l.s = nil // the Core's now
	l.clearPause()
	if err := l.flush(); err != nil {
		return err
	}
	n, serial := l.c.Parallel()
	if serial {
		l.say("running: %d atoms, %d unresolved, one worker at a time (up to %d when their declared scopes are disjoint)", len(s.Atoms), dag.Unresolved(s), n)
	} else {
		l.say("running: %d atoms, %d unresolved, up to %s at once", len(s.Atoms), dag.Unresolved(s), brief.Count(n, "agent"))
	}
	return nil
}

// event records ev: through the Core once it runs, before that (while the
// run recovers what the previous one left) straight to the journal, with
// the loop's iteration and the run's time.
func (l *localHost) event(ev journal.Event) {
	if l.c != nil {
		l.c.Event(ev)
		return
	}
	if ev.Iteration == 0 {
		ev.Iteration = l.s.Control.Iteration
	}
	if ev.Time.IsZero() {
		ev.Time = l.Now()
	}
	l.Event(ev)
}

// say shows a progress line, as event records an event.
func (l *localHost) say(format string, args ...any) {
	if l.c != nil {
		l.c.Say(format, args...)
		return
	}
	l.Say(engine.Line(l.Now().Sub(l.start), fmt.Sprintf(format, args...)))
}

// loop is the coordinator: schedule, wait, integrate, evaluate, until a bound.
func (l *localHost) loop(ctx context.Context) engine.Outcome {
	c := l.c
	tick := time.NewTicker(l.opts.PollInterval)
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
		case r := <-l.results:
			c.Finish(ctx, r.id, l.took(r))
			for more := true; more; {
				select {
				case r := <-l.results:
					c.Finish(ctx, r.id, l.took(r))
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
			if err := l.Sync(); err != nil {
				return c.Fail(err)
			}
			if done {
				return c.GiveUp(ctx, out)
			}
		case <-tick.C:
			if err := l.poll(ctx); err != nil {
				return c.Fail(err)
			}
			l.heartbeat()
		case <-ctx.Done():
			c.Stop(engine.Interruption(ctx))
		}
		if out, stopped := c.Stopped(); stopped {
			return out
		}
		if c.Dirty() && (c.Urgent() || l.Now().Sub(l.lastFlush) >= l.opts.FlushInterval) {
			if err := l.Flush(); err != nil {
				return c.Fail(err)
			}
		}
	}
}

// stoppable runs a step that blocks the loop (verification, planning) with
// a context that a stop request cancels, so aot stop works there too.
func (l *localHost) stoppable(ctx context.Context, fn func(context.Context)) {
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
		l.c.Stop(r)
	default:
	}
}

// watchStop cancels a blocking step when a stop is requested meanwhile.
func (l *localHost) watchStop(ctx context.Context, cancel context.CancelFunc, stopped chan<- string) {
	t := time.NewTicker(l.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s, err := l.store.Read(); err == nil && s.Control.StopRequested {
				stopped <- stopReason(s)
				cancel()
				return
			}
		}
	}
}

// stopReason is the reason of the stop requested in s.
func stopReason(s *state.State) string {
	if r := s.Control.StopReason; r != nil && strings.TrimSpace(*r) != "" {
		return *r
	}
	return "aot stop"
}

// poll looks for a stop in the state file and for redirect requests.
func (l *localHost) poll(ctx context.Context) error {
	if !stampOf(l.opts.StateFile).equal(l.stamp) {
		if err := l.external(); err != nil {
			return err
		}
	}
	if l.jr != nil {
		if err := l.jr.Verify(); err != nil {
			return err
		}
	}
	reqs, err := pendingRequests(l.opts.StateFile)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		switch {
		case r.bad != nil:
			answer(r, r.bad)
		case r.control != "":
			l.control(r)
		default:
			l.redirect(r)
		}
	}
	return nil
}

// control applies a pause or resume request.
func (l *localHost) control(r request) {
	switch r.control {
	case controlPause:
		answer(r, l.c.Pause(r.kill, r.change.Reason))
	case controlResume:
		answer(r, l.c.Resume(r.change.Reason))
	}
}

// redirect applies a person's change to the running loop, and answers
// once the state file shows it.
func (l *localHost) redirect(r request) {
	stopped, err := l.c.Redirect(r.change)
	if err != nil {
		answer(r, err)
		l.say("redirect refused: %v", err)
		return
	}
	err = l.Flush()
	answer(r, err)
	if err != nil {
		l.say("redirect failed: %v", err)
		return
	}
	l.say("redirected: %s (agents stopped: %d)", r.change.Reason, len(stopped))
}

// finish kills what still runs, lands the merged work, records the stop in
// the state and the journal, and writes both.
func (l *localHost) finish(out *engine.Outcome) error {
	c := l.c
	if h, ok := c.Halted(); ok && out.Reason == "" {
		*out = h
	}
	c.CancelAll("the loop stopped: " + string(out.Reason))
	_ = removePause(l.opts.StateFile)
	*out = c.End(*out, l.land(context.Background(), out))
	err := l.flush()
	if cerr := l.jr.Close(); err == nil {
		err = cerr
	}
	l.say("halted: %s: %s", out.Reason, out.Message)
	return err
}

// replay re-applies worker results that reached the journal but not the
// state file before a crash: every successful worker finish after the last
// checkpoint whose atom is not resolved yet. It returns how many it applied.
func (l *localHost) replay(events []journal.Event) int {
	s := l.s
	n := 0
	for _, ev := range events {
		if ev.Type != journal.AtomFinish || ev.Role != string(agent.Worker) || ev.OK == nil || !*ev.OK {
			continue
		}
		a := s.Atom(ev.Atom)
		if a == nil || a.Status == state.StatusResolved {
			continue
		}
		d := journal.DataOf[journal.AtomFinishData](ev)
		a.Status = state.StatusResolved
		var arts []string // none is nil, as the binding always had it
		if len(d.Artifacts) > 0 {
			arts = d.Artifacts
		}
		summary := d.Summary
		if strings.TrimSpace(summary) == "" {
			summary = "resolved by the worker"
		}
		_ = dag.Bind(s, a.ID, summary, arts)
		l.event(journal.Event{Atom: a.ID, Role: ev.Role, OK: journal.Bool(true)}.With(d).Replayed())
		n++
	}
	if n > 0 {
		dag.ResolveParents(s)
	}
	return n
}

// loadUsage is the loop's spend from the journal: the last checkpoint's
// totals plus every finished attempt after it, summed as the kernel sums
// them (saturating; a negative or non-finite number counts as nothing),
// and how many attempts reported none. A journal written before
// checkpoints carried totals is summed whole.
func (l *localHost) loadUsage(cp *journal.Event, after []journal.Event) (agent.Usage, int, error) {
	var total agent.Usage
	unknown := 0
	if cp != nil {
		if journal.DataOf[journal.CheckpointData](*cp).InputTokens == nil {
			// An older journal: no totals in its checkpoints.
			all, err := journal.Read(journal.PathFor(l.opts.StateFile))
			if err != nil {
				return total, 0, fmt.Errorf("read the journal: %w", err)
			}
			cp, after = nil, all
		}
	}
	if cp != nil {
		d := journal.DataOf[journal.CheckpointData](*cp)
		total = agent.Usage{
			InputTokens:  int64(*d.InputTokens),
			OutputTokens: int64(d.OutputTokens),
			CostUSD:      agent.AddCost(0, d.CostUSD),
		}
		unknown = int(d.UsageUnknown)
	}
	for _, ev := range after {
		if ev.Type != journal.AtomFinish || ev.IsReplayed() {
			continue
		}
		d := journal.DataOf[journal.AtomFinishData](ev)
		if d.UsageUnknown {
			unknown++
		}
		in, out := d.Tokens()
		u := agent.Usage{InputTokens: in, OutputTokens: out, CostUSD: ev.CostUSD}
		if u.Tokens() == 0 {
			u.InputTokens = ev.Tokens // only the total was journaled
		}
		total = total.Plus(u)
	}
	return total, unknown, nil
}
