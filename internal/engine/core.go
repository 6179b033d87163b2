package engine

import (
	"context"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
	"github.com/aot-loop/aot/internal/workspace"
)

// Core is the kernel's public steps. Both drivers move a loop on through
// them, the local run (package local) and the Temporal workflow (package
// durable), and each carries out the effects through its Host. A Core is not safe
// for concurrent use: its driver calls it from one goroutine (or one
// workflow coroutine at a time), and so do the Host's methods it calls
// back.
type Core struct {
	e *engine
}

// Host carries out the engine's effects for its driver: a local run
// (package local) starts agents on goroutines, journals and writes the
// state file; the Temporal workflow (package durable) turns each effect into an
// activity or a workflow event. So both make the same decisions from one
// copy of the code, and the decisions themselves are deterministic: their
// clock is Now, and nothing in them depends on the order of a map. Start
// and Cancel return at once; Drain, Checks and RunAgent block until done
// or until ctx ends. The engine calls a Host from one goroutine at a time.
type Host interface {
	// Now is the driver's clock (workflow.Now in a workflow).
	Now() time.Time
	// Event records a journal event.
	Event(ev journal.Event)
	// Say shows a progress line to people.
	Say(line string)
	// Start begins an attempt; the driver reports its end with
	// Core.Finish.
	Start(ctx context.Context, a Attempt)
	// Cancel cancels an attempt in flight; its result is discarded (the
	// driver still reports its end with Core.Finish).
	Cancel(id int)
	// Drain waits, bounded, for the cancelled attempts, reporting each
	// end with Core.Finish.
	Drain(ctx context.Context)
	// Checks runs the base case on the merged work, with the judge when
	// judges is set.
	Checks(ctx context.Context, judges bool) (verify.Report, error)
	// RunAgent runs one agent to its end (the base case's planner).
	RunAgent(ctx context.Context, t agent.Task) (agent.Result, error, time.Duration)
	// Sync makes the events recorded so far durable.
	Sync() error
	// Flush makes the state durable where other processes read it (a
	// local run writes the state file); it runs before a verification.
	Flush() error
	// ShowPause shows the pause in force (nil: none) to other processes;
	// an error refuses the pause.
	ShowPause(p *PauseInfo) error
}

// Attempt is one agent run the Core decided.
type Attempt struct {
	ID      int        `json:"id"`
	Atom    string     `json:"atom"`
	Role    agent.Role `json:"role"`
	N       int        `json:"n"` // the atom's attempt number
	Task    agent.Task `json:"task"`
	Started time.Time  `json:"started"`
}

// Finished is an attempt's end as its driver reports it.
type Finished struct {
	Result agent.Result
	Err    error // the attempt failed (an *agent.AttemptError classifies it)
	Dur    time.Duration
	// Merge is what integrating a worker's work did (nil: nothing to
	// merge, or no isolation); Branch names the attempt's branch.
	Merge  *workspace.Merge
	Branch string
	// Worktree and Dir are the attempt's worktree and the folder its agent
	// ran in, when the driver made one for it (a local run's isolation).
	Worktree, Dir string
	// Touched are the files a worker attempt in the project root changed;
	// nil when they were not measured.
	Touched *[]string
	// Refused and Retried are the tool calls the agent's CLI refused and
	// the model calls it retried while it ran, as the driver heard them
	// (the answer's own Denials are added to them).
	Refused []agent.Denial
	Retried []string
}

// CoreOptions configure a Core.
type CoreOptions struct {
	// Settings are the run's own choices, as aot run's flags made them.
	Settings
	RetryBackoff time.Duration // default DefaultRetryBackoff
	MaxBackoff   time.Duration // default DefaultMaxBackoff
	// Workdir and StateFile are what the agents' tasks name: a driver
	// whose agents run elsewhere gives them relative to the repository.
	Workdir   string
	StateFile string
	// Agents names each role's agent and Confinement says how their writes
	// are confined: both are journaled when the run starts (nil: unknown).
	Agents      map[string]string
	Confinement *journal.Confinement
	// Carry resumes a Core where an earlier one stopped (Carry()); nil
	// starts the loop, as aot run does.
	Carry *Carry

	// What a driver that resumes a loop from its own records (a local
	// run's journal) found there; a Carry holds them otherwise.
	//
	// Replayed, when set, says that the driver looked for what a crashed
	// run left and re-applied this many of its results: a loop still
	// marked running is then resumed after a crash. Spent and Unknown
	// are the loop's spend so far and the attempts that reported none.
	Replayed *int
	Spent    agent.Usage
	Unknown  int
	// Start is when the run started, if before the Core (default: the
	// Host's Now): max_wall_time and the progress lines count from it.
	Start time.Time
	// IsoCap caps the parallelism (0: no cap); Serial runs workers one at
	// a time unless their declared scopes are disjoint (agents share the
	// project root); Integration is where agents and checks read the
	// merged work ("": Workdir).
	IsoCap      int
	Serial      bool
	Integration string
}

// NewCore starts (or, with o.Carry, resumes) the loop of s: orphaned work
// back to pending, the loop marked running, a run_start or run_resume
// event. s becomes the Core's.
func NewCore(s *state.State, o CoreOptions, h Host) *Core {
	opts := options{
		Settings:     o.Settings,
		RetryBackoff: o.RetryBackoff, MaxBackoff: o.MaxBackoff,
		Workdir: o.Workdir, StateFile: o.StateFile, Agents: o.Agents, Confinement: o.Confinement,
	}
	if opts.AgentTimeout <= 0 {
		opts.AgentTimeout = DefaultAgentTimeout
	}
	e := newEngine(opts, h)
	c := &Core{e: e}
	e.s = s
	e.isoCap, e.serial, e.integration = o.IsoCap, o.Serial, o.Integration
	if cy := o.Carry; cy != nil {
		e.book = *cy
		e.book.fill()
	} else {
		e.book.Usage, e.book.Unknown = o.Spent, o.Unknown
		if !o.Start.IsZero() {
			e.book.Start = o.Start
		}
		e.startRun(o.Replayed)
	}
	e.applyBounds()
	e.dirty = true
	e.rebuild()
	if o.Carry == nil {
		e.newSweep()
	}
	return c
}

// Carry is what the next Core of this loop needs; call it when nothing is
// in flight.
func (c *Core) Carry() Carry { return c.e.book }

// State is the loop's state as the Core holds it; callers must not change
// it.
func (c *Core) State() *state.State { return c.e.s }

// Bounds checks the halting conditions; done means the loop ends with out
// (after GiveUp).
func (c *Core) Bounds() (out Outcome, done bool) { return c.e.bounds() }

// GiveUp is the last step before a stop on a bound: the base case is
// checked, and a loop whose work is done completes instead.
func (c *Core) GiveUp(ctx context.Context, out Outcome) Outcome { return c.e.giveUp(ctx, out) }

// Schedule starts attempts on the executable atoms while slots are free.
// ctx is what the attempts' Host.Start gets.
func (c *Core) Schedule(ctx context.Context) {
	e := c.e
	if e.reshape {
		e.rebuild()
	}
	e.release()
	e.schedule(ctx)
}

// Merging says that attempt id's agent has finished and its work waits for
// a merge the driver does apart from it: its slot is free for another
// agent (max_parallel_agents counts agents), while its atom stays busy
// until Finish.
func (c *Core) Merging(id int) {
	if t := c.e.tasks[id]; t != nil {
		t.merging = true
	}
}

// InFlight counts the attempts started and not finished (cancelled ones
// too, until their end is reported).
func (c *Core) InFlight() int { return len(c.e.tasks) }

// Quiet reports whether nothing runs and nothing will start by itself: no
// attempt in flight, no backoff or quota wait, no pause. Then Settle
// decides what comes next.
func (c *Core) Quiet() bool {
	e := c.e
	return len(e.tasks) == 0 && !e.waitingForTime() && e.book.Paused == nil
}

// Settle runs when the loop is Quiet: the work is done (the base case is
// verified, failing work reopened or planned), or the loop is stuck.
func (c *Core) Settle(ctx context.Context) (Outcome, bool) { return c.e.idle(ctx) }

// Finish integrates an attempt's end.
func (c *Core) Finish(ctx context.Context, id int, f Finished) {
	tr := taskResult{id: id, res: f.Result, err: f.Err, dur: f.Dur, touched: f.Touched, refused: f.Refused, retried: f.Retried}
	if f.Merge != nil || f.Dir != "" {
		tr.iso = &taskMerge{attempt: workspace.Attempt{Branch: f.Branch, Path: f.Worktree, Dir: f.Dir}, merge: f.Merge}
	}
	c.e.integrate(ctx, tr)
}

// AfterFinish ends a sweep when every executable atom has had its attempt,
// and looks for the cause of a sweep without progress; done means the
// loop ends with out.
func (c *Core) AfterFinish(ctx context.Context) (Outcome, bool) {
	e := c.e
	if e.checkSweep() {
		if out, done := e.afterStall(ctx); done {
			return e.giveUp(ctx, out), true
		}
	}
	return Outcome{}, false
}

// Wake is when the loop next has something to do by itself: a backoff
// ends, a quota or rate limit resets, max_wall_time is spent. Zero: no
// such time.
func (c *Core) Wake() time.Time {
	e := c.e
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, until := range e.book.Waiting {
		earlier(until)
	}
	if e.now().Before(e.book.QuotaUntil) {
		earlier(e.book.QuotaUntil)
	}
	if e.now().Before(e.book.RateUntil) {
		earlier(e.book.RateUntil)
	}
	if d := e.wallTime(); d > 0 && e.book.Paused == nil {
		earlier(e.now().Add(d - e.active()))
	}
	return next
}

// Pause holds the loop: nothing new starts; kill cancels the running
// attempts (their atoms go back to pending, not charged).
func (c *Core) Pause(kill bool, reason string) error { return c.e.pause(kill, reason) }

// Resume ends a pause; ErrNotPaused when there is none.
func (c *Core) Resume(reason string) error { return c.e.resume(reason) }

// Paused is the pause in force, nil when none.
func (c *Core) Paused() *PauseInfo { return c.e.book.Paused }

// Check validates a change without applying it.
func (c *Core) Check(ch Change) error { return Apply(state.Clone(c.e.s), ch, c.e.now()) }

// Redirect applies a person's change to the running loop; it returns the
// atoms whose attempts it stopped. A refused change changes nothing.
func (c *Core) Redirect(ch Change) ([]string, error) { return c.e.change(ch) }

// Stop ends the loop at the next bounds check (aot stop).
func (c *Core) Stop(reason string) {
	if c.e.stop == nil {
		c.e.stop = &reason
	}
}

// Stopping reports whether a stop was asked for.
func (c *Core) Stopping() bool { return c.e.stop != nil }

// Halt stops the loop with a reason a bound does not give (a failure of
// the machinery); Bounds ends the loop with it.
func (c *Core) Halt(r Reason, msg string) { c.e.stopWith(r, msg) }

// End records how the loop ended: what still runs is cancelled, the state
// says stopped or completed, a stop event is recorded. landing says where
// the merged work is.
func (c *Core) End(out Outcome, landing string) Outcome {
	c.e.conclude(&out, landing)
	return out
}

// Usage is what the loop has spent, and how many attempts reported no
// usage.
func (c *Core) Usage() (agent.Usage, int) { return c.e.book.Usage, c.e.book.Unknown }

// Running lists the attempts in flight, in the order they started.
func (c *Core) Running() []Attempt {
	e := c.e
	var out []Attempt
	for _, id := range e.taskIDs() {
		if t := e.tasks[id]; !t.discarded {
			out = append(out, Attempt{ID: t.id, Atom: t.atom, Role: t.role, N: t.attempt, Started: t.start})
		}
	}
	return out
}

// Hold keeps the Core from starting attempts while on is set (a driver
// about to hand the loop over lets what runs finish first).
func (c *Core) Hold(on bool) { c.e.hold = on }

// Spent adds what agents the driver ran itself cost (the judge in a
// verification); unknown counts those that reported nothing.
func (c *Core) Spent(u agent.Usage, unknown int) {
	u.Known = true
	c.e.addKnown(u)
	c.e.book.Unknown += unknown
}

// Dirty reports whether the state changed since MarkClean.
func (c *Core) Dirty() bool { return c.e.dirty }

// MarkClean notes that the driver has shown the state as it is.
func (c *Core) MarkClean() { c.e.dirty, c.e.urgent = false, false }

// Urgent reports whether the graph's shape changed since MarkClean (an OR
// switch, a decomposition, new atoms): a driver that shows the state now
// and then shows it at once.
func (c *Core) Urgent() bool { return c.e.urgent }

// Stopped is the end of a loop asked to stop (Stop); ok is false when no
// stop was asked for.
func (c *Core) Stopped() (out Outcome, ok bool) {
	if c.e.stop == nil {
		return Outcome{}, false
	}
	return c.e.outcome(ManualStop, "manual stop: "+*c.e.stop), true
}

// Fail ends the loop on a failure of the machinery (an I/O error), at
// once.
func (c *Core) Fail(err error) Outcome { return c.e.failed(err) }

// Say shows a progress line to people, after the time the run has taken
// ("[01:05] ..."), through the Host.
func (c *Core) Say(format string, args ...any) { c.e.say(format, args...) }

// Event records ev through the Host, with the loop's iteration and the
// Host's time when ev has none.
func (c *Core) Event(ev journal.Event) { c.e.event(ev) }

// Atom is the atom id of the Core's state, nil when there is none.
func (c *Core) Atom(id string) *state.Atom { return c.e.ix.Atom(id) }

// Parallel is how many agents may run at once now, and whether workers
// run one at a time unless their scopes are disjoint (CoreOptions.Serial).
func (c *Core) Parallel() (n int, serial bool) { return c.e.parallel, c.e.serial }

// Replaces reports whether next changes the loop's objective, so that
// adopting it stops every attempt.
func (c *Core) Replaces(next *state.State) bool {
	all, _ := invalidated(c.e.s, next, c.e.ix)
	return all
}

// Adopt makes next, a valid state the driver found (a person's hand edit
// of the state file), the loop's state as a redirect does: only the
// attempts whose work next invalidates are stopped, and their atoms are
// returned. why is what the stopped attempts' resets say.
func (c *Core) Adopt(next *state.State, why string) []string {
	stopped := c.e.adopt(next, why)
	c.e.dirty = true
	return stopped
}

// CancelAll cancels every attempt in flight and waits for their ends
// (Host.Drain), and forgets a pause: the step before End when a driver
// lands the work before recording the end.
func (c *Core) CancelAll(why string) {
	c.e.killAll(why)
	c.e.book.Paused = nil
}

// Halted is the end a step decided by itself (a usage limit, a failure of
// the machinery); ok is false when none did.
func (c *Core) Halted() (out Outcome, ok bool) {
	if h := c.e.halt; h != nil {
		return c.e.outcome(h.Reason, h.Message), true
	}
	return Outcome{}, false
}
