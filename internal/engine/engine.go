// Package engine is the loop's coordinator, in code: it runs agents on the
// executable atoms of the work graph, integrates their results, backtracks,
// decomposes, verifies the base case itself, and halts on a bound.
//
// The engine keeps the state in memory while it runs. Every transition is
// appended to the journal (its write-ahead log) and synced before the state
// file is written; the state file follows at most FlushInterval behind and
// on every stop. After a crash the next run replays the journal's results
// since the last checkpoint, so no resolved atom is redone.
package engine

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// Options configure one run.
type Options struct {
	// Settings are the run's own choices (aot run's flags).
	Settings
	StateFile     string
	Agent         agent.Agent
	Workdir       string        // where agents and checks run; default: the project root of StateFile
	PollInterval  time.Duration // how often stop and redirect requests are looked for; default 100ms
	FlushInterval time.Duration // how far the state file may lag the journal; default 500ms
	Progress      io.Writer     // live progress for people; nil = quiet
	Heartbeat     time.Duration // how often Progress lists the running atoms; default 30s
	// RetryBackoff is the wait before a failed atom's first retry; it doubles
	// with each further failure up to MaxBackoff. Defaults DefaultRetryBackoff
	// and DefaultMaxBackoff.
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
	// its tree should the engine die and, if it says so, confines its
	// writes; its status is journaled when the run starts.
	Guard *confine.Guard
	Now   func() time.Time
}

// DefaultAgentTimeout bounds one agent attempt when no timeout is given.
const DefaultAgentTimeout = 30 * time.Minute

// Retry defaults, chosen with the outcome benchmark (docs/PERFORMANCE.md).
const (
	DefaultRetryBackoff = time.Second
	DefaultMaxBackoff   = 30 * time.Second
	// DefaultMaxAttemptsPerAtom applies when constraints.max_attempts_per_atom
	// is absent or 0.
	DefaultMaxAttemptsPerAtom = 10
)

// Outcome is how a run ended.
type Outcome struct {
	Reason     Reason      `json:"reason"`
	ExitCode   int         `json:"exit_code"`
	Message    string      `json:"message"`
	Iterations int         `json:"iterations"`
	Resolved   int         `json:"resolved"`
	Unresolved int         `json:"unresolved"`
	Usage      agent.Usage `json:"usage"`
	Waits      []dag.Wait  `json:"waits,omitempty"`
	Failures   []string    `json:"failures,omitempty"` // the base case's failing checks, when it was checked before stopping
	// UnknownUsage counts attempts whose usage nobody reported: the totals
	// are a lower bound when it is not 0.
	UnknownUsage int `json:"unknown_usage,omitempty"`
	// Landing says where the merged work is, with isolated workers.
	Landing string `json:"landing,omitempty"`
	Elapsed string `json:"elapsed"`
}

// task is one agent run in flight.
type task struct {
	id        int
	role      agent.Role
	atom      string
	attempt   int
	start     time.Time
	discarded bool // killed by a stop, a redirect or a speculative winner: its result is ignored
	// merging: its agent has finished and its work waits for its merge
	// (a driver that merges apart from the attempt says so, Core.Merging):
	// it holds no agent's slot any more.
	merging bool
}

type taskResult struct {
	id  int
	res agent.Result
	err error
	dur time.Duration
	iso *taskMerge // what isolation did with a worker attempt
	// touched are the files a worker attempt in the project root changed
	// (nil: not measured, or isolated).
	touched *[]string
}

type engine struct {
	// book is what the engine keeps beyond the state, handed whole to the
	// next engine of the loop (Core.Carry).
	book    Carry
	host    Host // what touches the world: a local run's, or a Core's driver's
	denied  perTask[agent.Denial]
	retried perTask[string] // the model calls each task's CLI retried
	// claims are the files each resolved atom's worker named, beside the
	// files its attempt changed (its binding's artifacts with isolation),
	// for the base case's failures to point at (reopen).
	claims  map[string][]string
	opts    Options
	store   *state.Store
	jr      *journal.Journal
	s       *state.State
	tasks   map[int]*task
	busy    map[string]int // atom -> running task id
	results chan taskResult
	nextID  int

	expanded bool // the work graph grew in this iteration

	// Retries and sweeps (sweep.go).
	unattempted map[string]bool // executable atoms without one yet
	draining    bool            // a bound is reached: start nothing, let running agents finish
	sayMu       sync.Mutex      // progress lines come from attempts' goroutines too
	dirty       bool
	lastFlush   time.Time
	stamp       fileStamp
	place       placeStamp   // the project folder the run started in (moved.go)
	lastWritten *state.State // what the engine last wrote to the state file
	infra       bool         // the failure being recorded was a crash, timeout or garbage
	stop        *string      // a stop was requested, with its reason
	parallel    int
	maxIter     int
	halt        *Outcome   // a stop decided inside a step (usage limit)
	trees       treeSet    // process trees of the attempts in flight
	iso         *isolation // nil: agents share the project root
	isoCap      int        // the parallelism the isolation mode allows, 0 = no cap
	serial      bool       // no isolation: workers one at a time unless their scopes are disjoint
	lastBeat    time.Time
	hold        bool // the driver starts nothing new for now (Core.Hold)

	// Incremental view of the graph, so a transition costs the same at 10
	// or 100,000 atoms: rebuilt only when the graph's shape changes.
	ix         *dag.Index
	ready      map[string]bool // executable atoms not yet started
	queue      positions       // ready atoms by file position (may hold stale entries)
	bindIdx    map[string]int  // atom -> index in s.Bindings
	unresolved int             // dag.Unresolved, -1 when it must be recounted
	reshape    bool            // the graph's shape changed: rebuild ix and ready
}

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

	e := newEngine(opts)
	lh := &localHost{e: e, cancels: map[int]context.CancelFunc{}}
	e.host = lh
	e.store.Guard(func() error {
		if e.stamp.fi != nil && !stampOf(opts.StateFile).equal(e.stamp) {
			return errChangedBehind
		}
		return nil
	})
	if err := e.begin(); err != nil {
		if e.jr != nil {
			_ = e.jr.Close()
		}
		return Outcome{}, err
	}
	out := e.loop(confine.With(ctx, opts.Guard), lh)
	if err := e.finish(&out); err != nil {
		return out, err
	}
	return out, nil
}

// newEngine builds an engine with its defaults.
func newEngine(opts Options) *engine {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = DefaultRetryBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	e := &engine{
		opts:        opts,
		store:       state.NewStore(opts.StateFile),
		tasks:       map[int]*task{},
		busy:        map[string]int{},
		results:     make(chan taskResult, 64),
		unattempted: map[string]bool{},
		book: Carry{
			Start: opts.Now(), VerifiedGen: -1, DepGen: -1,
			MaxParallel: opts.MaxParallel, MaxIterations: opts.MaxIterations,
		},
	}
	e.book.fill()
	return e
}

// ProjectRoot is the directory a loop works in: the parent of the state
// file's .claude directory, else the state file's directory.
func ProjectRoot(stateFile string) string { return state.ProjectRoot(stateFile) }

func (e *engine) now() time.Time { return e.opts.Now() }

func (e *engine) event(ev journal.Event) {
	if ev.Iteration == 0 {
		ev.Iteration = e.s.Control.Iteration
	}
	if ev.Time.IsZero() {
		ev.Time = e.now()
	}
	e.host.Event(ev)
}

func (e *engine) say(format string, args ...any) {
	el := e.now().Sub(e.book.Start).Round(time.Second)
	e.host.Say(fmt.Sprintf("[%02d:%02d] %s", int(el.Minutes()), int(el.Seconds())%60, fmt.Sprintf(format, args...)))
}

// activity shows a running agent's tool call as a progress line:
// "A3 Bash: go test ./...". It runs on the attempt's goroutine.
func (e *engine) activity(id int, atom string, role agent.Role, a agent.Activity) {
	who := atom
	if role != agent.Worker {
		who = atom + " (" + string(role) + ")"
	}
	if a.Refused {
		e.denied.add(id, agent.Denial{Tool: a.Tool, Path: a.Detail, Why: a.Why})
		e.say("%s %s refused: %s", who, a.Tool, dag.OneLine(strings.TrimPrefix(a.Detail+": "+a.Why, ": "), 160))
		return
	}
	if a.Retry {
		e.retried.add(id, a.Detail)
		e.say("%s: %s", who, dag.OneLine(a.Detail, 160))
		return
	}
	if a.Tool == "" {
		e.say("%s: %s", who, dag.OneLine(a.Detail, 100))
		return
	}
	e.say("%s %s: %s", who, a.Tool, dag.OneLine(a.Detail, 100))
}

// heartbeat tells a person which atoms are running and for how long.
func (e *engine) heartbeat() {
	if e.opts.Progress == nil || len(e.tasks) == 0 || e.now().Sub(e.lastBeat) < e.opts.Heartbeat {
		return
	}
	e.lastBeat = e.now()
	list := make([]*task, 0, len(e.tasks))
	for _, t := range e.tasks {
		if !t.discarded {
			list = append(list, t)
		}
	}
	slices.SortFunc(list, func(a, b *task) int { return a.id - b.id })
	parts := make([]string, 0, len(list))
	for _, t := range list {
		parts = append(parts, fmt.Sprintf("%s %s for %s", t.role, t.atom, e.now().Sub(t.start).Round(time.Second)))
	}
	e.say("running: %s", strings.Join(parts, ", "))
}

// begin reads the state, checks that it can run, recovers from a crash and
// marks the loop running.
func (e *engine) begin() error {
	s, err := e.store.Read()
	if err != nil {
		return err
	}
	if missing := s.Missing(); len(missing) > 0 {
		return &NotReadyError{Missing: missing}
	}
	// The loop's own name, written before anything is named after it.
	if s, err = EnsureLoopID(e.store, s); err != nil {
		return err
	}
	_, gone := os.Stat(journal.PathFor(e.opts.StateFile))
	jr, err := journal.Open(journal.PathFor(e.opts.StateFile))
	if err != nil {
		return err
	}
	jr.OnLost = func(why string) { e.say("%s", why) }
	e.jr = jr
	e.s = s
	if errors.Is(gone, os.ErrNotExist) && (s.Control.Iteration > 0 || s.Control.Status != state.ControlPending) {
		// Deleted between runs: nothing holds it any more. Said, so that
		// nobody takes the budgets' zero for the loop's spend.
		why := fmt.Sprintf("no journal at %s although the loop has run (iteration %d): its spend so far is unknown, and the budgets count from 0", journal.PathFor(e.opts.StateFile), s.Control.Iteration)
		e.event(journal.Event{Type: journal.JournalLost, Reason: why})
		e.say("%s", why)
	}
	e.place = stampPlace(e.opts.StateFile)
	// What the previous run journaled since its last write of the state
	// file, read once: its agents still alive, its spend, its results.
	// A journal that cannot be read is an error: a run that started from
	// it would forget the loop's spend and the processes it must kill.
	cp, after, err := journal.ReadFromCheckpoint(journal.PathFor(e.opts.StateFile))
	if err != nil {
		return fmt.Errorf("read the journal: %w", err)
	}
	e.killSurvivors(cp, after)
	if e.isoCap, err = e.openIsolation(context.Background()); err != nil {
		return err
	}
	if err := e.loadUsage(cp, after); err != nil {
		return err
	}
	replayed := e.replay(after)
	replayed += e.adoptMerges(context.Background())
	e.startRun(&replayed)
	e.clearPause()
	e.applyBounds()
	e.dirty = true
	e.rebuild()
	if err := e.flush(); err != nil {
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

// startRun journals how the run starts, puts work orphaned by an earlier
// run back to pending and marks the loop running. crash is the data of a
// resume after a crash (a loop found running with no engine): the number
// of results replayed; nil when a loop found running was started elsewhere
// (a Core's driver marks it so).
func (e *engine) startRun(crash *int) {
	s := e.s
	agents, confinement := e.runData()
	switch prev := s.Control.Status; {
	case prev == state.ControlRunning && crash != nil:
		e.event(journal.Event{Reason: "the previous engine is gone (crash or kill); resuming"}.With(
			journal.RunResumeData{Agents: agents, Confinement: confinement, Replayed: crash}))
	case prev == state.ControlStopped || prev == state.ControlCompleted:
		e.event(journal.Event{Reason: "resuming a " + prev + " loop"}.With(journal.RunResumeData{Agents: agents, Confinement: confinement,
			PreviousStopReason: journal.Ref(deref(s.Control.StopReason)), StallCount: journal.Ref(s.Control.StallCount)}))
		// A person ran the loop again: the stall window starts afresh.
		s.Control.StallCount = 0
	default:
		e.event(journal.Event{}.With(journal.RunStartData{Agents: agents, Confinement: confinement}))
	}
	for i := range s.Atoms {
		if a := &s.Atoms[i]; a.Status == state.StatusInProgress {
			a.Status = state.StatusPending
			e.event(journal.Event{Type: journal.AtomReset, Atom: a.ID, Reason: "orphaned: in progress when the previous run ended"})
		}
	}
	s.Control.Status = state.ControlRunning
	s.Control.StopRequested = false
	s.Control.StopReason = nil
	s.Control.RedirectRequested = false
	e.book.StartIteration = s.Control.Iteration
}

// applyBounds takes the run's bounds from the constraints and the run's
// options; a redirect calls it again so that new bounds apply at once.
func (e *engine) applyBounds() {
	c := e.s.Objective.Constraints
	e.parallel = c.MaxParallelAgents
	if e.book.MaxParallel > 0 {
		e.parallel = e.book.MaxParallel
	}
	if e.parallel <= 0 {
		e.parallel = state.DefaultMaxParallelAgents
	}
	if e.isoCap > 0 && e.parallel > e.isoCap {
		e.parallel = e.isoCap
	}
	e.maxIter = c.MaxIterations
	if e.book.MaxIterations > 0 {
		// --max-iterations N: at most N iterations in this run.
		e.maxIter = e.book.StartIteration + e.book.MaxIterations
	}
}

// maxAttempts is the effective max_attempts_per_atom.
func (e *engine) maxAttempts() int {
	if m := e.s.Objective.Constraints.MaxAttemptsPerAtom; m > 0 {
		return m
	}
	return DefaultMaxAttemptsPerAtom
}

// NotReadyError lists what the state lacks before a run.
type NotReadyError struct{ Missing []string }

func (e *NotReadyError) Error() string {
	return "the loop cannot start:\n  - " + strings.Join(e.Missing, "\n  - ")
}

// loop is the coordinator: schedule, wait, integrate, evaluate, until a bound.
func (e *engine) loop(ctx context.Context, lh *localHost) Outcome {
	tick := time.NewTicker(e.opts.PollInterval)
	defer tick.Stop()
	for {
		if out, done := e.bounds(); done {
			return e.giveUp(ctx, out)
		}
		if e.reshape {
			e.rebuild()
		}
		e.release()
		e.schedule(ctx)
		if len(e.tasks) == 0 && !e.waitingForTime() && e.book.Paused == nil {
			if out, done := e.idle(ctx); done {
				return out
			}
			continue
		}
		select {
		case r := <-e.results:
			e.integrate(ctx, lh.took(r))
			for more := true; more; {
				select {
				case r := <-e.results:
					e.integrate(ctx, lh.took(r))
				default:
					more = false
				}
			}
			if e.checkSweep() {
				if out, done := e.afterStall(ctx); done {
					return e.giveUp(ctx, out)
				}
			}
			// Refill the freed slots first, then make the batch durable:
			// the fsync overlaps with the agents' work instead of delaying it.
			out, done := e.bounds()
			if !done {
				if e.reshape {
					e.rebuild()
				}
				e.schedule(ctx)
			}
			if err := e.syncJournal(); err != nil {
				return e.failed(err)
			}
			if done {
				return e.giveUp(ctx, out)
			}
		case <-tick.C:
			if err := e.poll(ctx); err != nil {
				return e.failed(err)
			}
			e.heartbeat()
		case <-ctx.Done():
			r := interruption(ctx)
			e.stop = &r
		}
		if e.stop != nil {
			return e.outcome(ManualStop, "manual stop: "+*e.stop)
		}
		if e.dirty && e.now().Sub(e.lastFlush) >= e.opts.FlushInterval {
			if err := e.flush(); err != nil {
				return e.failed(err)
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

func (e *engine) failed(err error) Outcome {
	return e.outcome(Failed, err.Error())
}

// idle runs when no agent is running and nothing could start: the loop is
// done with its atoms (verify), deadlocked, out of attempts on an atom, or
// stopped by an OR exhaustion.
func (e *engine) idle(ctx context.Context) (Outcome, bool) {
	if e.s.Control.Status == state.ControlStopped {
		return e.giveUp(ctx, e.outcome(ORExhausted, deref(e.s.Control.StopReason))), true
	}
	if e.unresolvedCount() > 0 {
		if g := exhaustedGroup(e.s); g != "" {
			return e.giveUp(ctx, e.outcome(ORExhausted, dag.ExhaustedReason(g)+"; add a choice with aot redirect --add-atom or switch with aot or switch")), true
		}
		if msg := e.parkedMessage(); msg != "" {
			return e.giveUp(ctx, e.outcome(MaxAttempts, msg)), true
		}
		waits := dag.Deadlock(e.s)
		out := e.outcome(Deadlock, deadlockMessage(waits))
		out.Waits = waits
		return e.giveUp(ctx, out), true
	}
	passed, failures, err := e.verify(ctx, true)
	if e.stop != nil {
		return e.outcome(ManualStop, "manual stop: "+*e.stop), true
	}
	if err != nil {
		return e.failed(err), true
	}
	if passed {
		return e.outcome(Completed, "the base case passed"), true
	}
	// Work an agent claimed but the checks do not find goes back to work;
	// otherwise the planner proposes atoms to fix what fails.
	if e.reopen(failures) == 0 {
		e.plan(ctx, "", failures)
	}
	// A verification round is an iteration of its own.
	e.endIteration()
	e.newSweep()
	return Outcome{}, false
}

// giveUp is the last step before any stop other than completed, manual stop
// or error: aot checks the base case itself, and a loop whose work is done
// completes whatever bound it reached. Otherwise the stop names the checks
// that fail.
func (e *engine) giveUp(ctx context.Context, out Outcome) Outcome {
	switch out.Reason {
	case Completed, ManualStop, Failed:
		return out
	}
	e.killAll("the loop is stopping: " + string(out.Reason))
	// Spending more on judges would break a budget or hit the same quota.
	judges := out.Reason != Budget && out.Reason != UsageLimit
	passed, failures, err := e.verify(ctx, judges)
	if e.stop != nil {
		return e.outcome(ManualStop, "manual stop: "+*e.stop)
	}
	if err != nil {
		return e.failed(err)
	}
	if passed {
		return e.outcome(Completed, "the base case passed (checked before stopping on "+string(out.Reason)+": "+out.Message+")")
	}
	if len(failures) > 0 {
		out.Message += "; the base case fails: " + strings.Join(failures, "; ")
	}
	out.Failures = failures
	return out
}

func deadlockMessage(waits []dag.Wait) string {
	if len(waits) == 0 {
		return "deadlock: atoms are unresolved but none can start"
	}
	var parts []string
	for _, w := range waits {
		parts = append(parts, fmt.Sprintf("%s waits on %s", w.Atom, orNone(w.WaitsOn)))
	}
	return "deadlock: " + strings.Join(parts, "; ")
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "nothing that can finish"
	}
	return strings.Join(list, ", ")
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// bounds checks every halting condition that does not need an event. Stall
// and max_iterations wait for running agents (draining): one of them may
// still succeed, and its work is not thrown away.
func (e *engine) bounds() (Outcome, bool) {
	c := &e.s.Objective.Constraints
	switch {
	case e.halt != nil:
		return e.outcome(e.halt.Reason, e.halt.Message), true
	case e.stop != nil:
		return e.outcome(ManualStop, "manual stop: "+*e.stop), true
	case e.s.Control.Status == state.ControlStopped:
		return e.outcome(ORExhausted, deref(e.s.Control.StopReason)), true
	}
	if c.MaxWallTime != "" {
		if d, err := state.ParseDuration(c.MaxWallTime); err == nil && d > 0 && e.active() >= d {
			return e.outcome(Budget, fmt.Sprintf("budget: max_wall_time %s spent in this run; raise it with aot redirect --reason R --max-wall-time D", c.MaxWallTime)), true
		}
	}
	if tokens := e.book.Usage.Tokens(); c.MaxTokens > 0 && tokens >= c.MaxTokens {
		return e.outcome(Budget, fmt.Sprintf("budget: %d tokens spent by the loop (max_tokens %d); raise it with aot redirect --reason R --max-tokens N", tokens, c.MaxTokens)), true
	}
	if c.MaxCostUSD > 0 && e.book.Usage.CostUSD >= c.MaxCostUSD {
		return e.outcome(Budget, fmt.Sprintf("budget: $%.4f spent by the loop (max_cost_usd %g); raise it with aot redirect --reason R --max-cost USD", e.book.Usage.CostUSD, c.MaxCostUSD)), true
	}
	var out Outcome
	switch {
	case e.maxIter > 0 && e.s.Control.Iteration-e.book.Repairs >= e.maxIter:
		repairs := ""
		if e.book.Repairs > 0 {
			repairs = fmt.Sprintf(" (and %s redoing work a check found broken, not counted)", brief.Count(e.book.Repairs, "more iteration"))
		}
		if e.book.MaxIterations > 0 {
			out = e.outcome(MaxIterations, fmt.Sprintf("max_iterations: %d iterations done in this run (--max-iterations %d)%s", e.s.Control.Iteration-e.book.StartIteration-e.book.Repairs, e.book.MaxIterations, repairs))
		} else {
			out = e.outcome(MaxIterations, fmt.Sprintf("max_iterations: %d of %d iterations done%s; raise the bound with aot redirect --reason R --max-iterations N, or run N more with aot run --max-iterations N", e.s.Control.Iteration-e.book.Repairs, e.maxIter, repairs))
		}
	case c.MaxStallCount > 0 && e.s.Control.StallCount >= c.MaxStallCount:
		out = e.outcome(Stalled, fmt.Sprintf("stall: %d sweeps in a row without progress (%d unresolved); aot run starts a new stall window, aot redirect --reason R --max-stall N raises the bound", e.s.Control.StallCount, e.unresolvedCount()))
	default:
		e.draining = false
		return Outcome{}, false
	}
	if e.runningWorkers() > 0 {
		if !e.draining {
			e.say("%s; waiting for the running agents before stopping", out.Message)
		}
		e.draining = true
		return Outcome{}, false
	}
	return out, true
}

func (e *engine) outcome(r Reason, msg string) Outcome {
	resolved := 0
	for i := range e.s.Atoms {
		if e.s.Atoms[i].Status == state.StatusResolved {
			resolved++
		}
	}
	return Outcome{
		Reason: r, ExitCode: r.ExitCode(), Message: msg,
		Iterations: e.s.Control.Iteration, Resolved: resolved, Unresolved: dag.Unresolved(e.s),
		Usage: e.book.Usage, UnknownUsage: e.book.Unknown, Elapsed: e.now().Sub(e.book.Start).Round(time.Millisecond).String(),
	}
}

// agentsRunning counts the tasks whose agent still runs: all of them, but
// those whose work only waits for its merge.
func (e *engine) agentsRunning() int {
	n := 0
	for _, t := range e.tasks {
		if !t.merging {
			n++
		}
	}
	return n
}

// schedule starts agents on executable atoms while slots are free.
func (e *engine) schedule(ctx context.Context) {
	free := e.slots() - e.agentsRunning()
	if free <= 0 || e.s.Control.Status != state.ControlRunning || e.draining || e.hold || e.book.Paused != nil || e.now().Before(e.book.QuotaUntil) || e.now().Before(e.book.RateUntil) {
		return
	}
	var cands []*state.Atom
	for free-len(cands) > 0 && e.queue.Len() > 0 {
		it := heap.Pop(&e.queue).(entry)
		a := &e.s.Atoms[it.pos]
		if _, running := e.busy[a.ID]; running || !e.ready[a.ID] {
			continue // a stale entry
		}
		if int32(a.Attempts) != it.attempts {
			heap.Push(&e.queue, entry{pos: it.pos, attempts: int32(a.Attempts)})
			continue // queued before its last failure: requeue by its attempts now
		}
		delete(e.ready, a.ID) // taken: a second entry for it is stale now
		cands = append(cands, a)
	}
	// Speculative OR groups run their other ready choices beside the selected one.
	for i := range e.s.ORGroups {
		g := &e.s.ORGroups[i]
		if !g.Speculative || g.Selected == "" {
			continue
		}
		if _, selRunning := e.busy[g.Selected]; !selRunning && !slices.ContainsFunc(cands, func(a *state.Atom) bool { return a.ID == g.Selected }) {
			continue
		}
		for _, a := range dag.ReadyChoices(e.s, g.Name) {
			if _, running := e.busy[a.ID]; !running && !slices.ContainsFunc(cands, func(x *state.Atom) bool { return x.ID == a.ID }) {
				cands = append(cands, a)
			}
		}
	}
	var held []*state.Atom
	for _, a := range cands {
		if free == 0 {
			held = append(held, a)
			continue
		}
		if !e.mayStart(a) {
			held = append(held, a) // its scope overlaps a running worker's
			continue
		}
		e.launch(ctx, a.ID)
		free--
	}
	for _, a := range held {
		if _, running := e.busy[a.ID]; !running && e.ix.Ready(a.ID) {
			e.markReady(a.ID)
		}
	}
}

// launch starts the next step of an atom's strategy.
func (e *engine) launch(ctx context.Context, id string) {
	a := e.ix.Atom(id)
	delete(e.ready, id)
	role := e.book.Next[id]
	if role == "" {
		role = agent.Worker
	}
	if role == agent.Worker {
		a.Status = state.StatusInProgress // pending -> in_progress: a is executable
		e.dirty = true
	}
	e.nextID++
	// A reopened atom's next try is a new attempt for the agent too, although
	// reopening is not charged against max_attempts_per_atom.
	t := &task{id: e.nextID, role: role, atom: id, attempt: a.Attempts + e.book.Reopens[id] + 1, start: e.now()}
	e.tasks[t.id] = t
	e.busy[id] = t.id
	in := e.taskFor(a, role, t.attempt)
	e.event(journal.Event{Type: journal.AtomStart, Atom: id, Role: string(role), Attempt: t.attempt})
	e.say("%s %s started (attempt %d): %s", role, id, t.attempt, dag.OneLine(a.Description, 60))
	e.host.Start(ctx, Attempt{ID: t.id, Atom: t.atom, Role: t.role, N: t.attempt, Task: in, Started: t.start})
}

// taskFor builds what an agent gets: the atom, the objective, and only the
// bindings of the atom's dependencies.
func (e *engine) taskFor(a *state.Atom, role agent.Role, attempt int) agent.Task {
	o := e.s.Objective
	t := agent.Task{
		Role:        role,
		Atom:        agent.AtomRef{ID: a.ID, Description: a.Description, DependsOn: append([]string{}, a.DependsOn...), ORGroup: a.ORGroup},
		Objective:   agent.Objective{Goal: o.Goal, BackgroundIntent: o.BackgroundIntent, Deliverables: o.Deliverables, DefinitionOfDone: o.DefinitionOfDone},
		Bindings:    map[string]agent.Binding{},
		Workdir:     e.readDir(),
		Attempt:     attempt,
		StateFile:   e.opts.StateFile,
		LastFailure: a.LastFailure,
	}
	if n := e.book.Notes[a.ID]; n != "" && role == agent.Worker {
		t.LastFailure = strings.TrimSpace(t.LastFailure + "\nprobe findings: " + n)
	}
	for _, d := range a.DependsOn {
		if i, ok := e.bindIdx[d]; ok {
			b := &e.s.Bindings[i]
			t.Bindings[d] = agent.Binding{Summary: b.Summary, Artifacts: append([]string{}, b.Artifacts...)}
		}
	}
	if role == agent.Planner && a.LastFailure != "" {
		t.Failures = []string{a.LastFailure}
	}
	return t
}

// integrate records one finished agent run. It reports whether the run was
// a worker's (an iteration's worth of work) rather than a probe or planner.
func (e *engine) integrate(ctx context.Context, r taskResult) bool {
	t := e.tasks[r.id]
	if t == nil {
		return false
	}
	delete(e.tasks, r.id)
	if e.busy[t.atom] == t.id {
		delete(e.busy, t.atom)
	}
	defer func() {
		// Whatever happened, an atom that can run again is a candidate.
		if _, running := e.busy[t.atom]; !running && !e.reshape && e.ix.Ready(t.atom) {
			e.markReady(t.atom)
		}
	}()
	e.addUsage(r.res.Usage, r.err)
	// Refused tool calls are journaled whatever becomes of the attempt.
	denials := e.journalRefusals(t, r)
	if t.discarded {
		return false
	}
	a := e.ix.Atom(t.atom)
	if a == nil {
		return false
	}
	if r.err == nil && r.res.UsageLimit {
		// Not the atom's fault: it goes back untouched, and the loop waits
		// for the quota to reset or stops.
		if a.Status == state.StatusInProgress {
			a.Status = state.StatusPending
			e.dirty = true
		}
		e.event(journal.Event{Type: journal.AtomReset, Atom: t.atom, Role: string(t.role), Attempt: t.attempt, Reason: "usage limit: " + dag.OneLine(r.res.Summary+r.res.Evidence+r.res.Findings, 200)})
		e.usageLimit(t.atom, r.res)
		return false
	}
	if ae, transient := agent.Transient(r.err); transient {
		// A rate limit or an overloaded provider: not the atom's fault
		// either; it goes back untouched and the loop waits a little, with
		// fewer agents at once.
		if a.Status == state.StatusInProgress {
			a.Status = state.StatusPending
			e.dirty = true
		}
		e.rateLimited(t, ae)
		return false
	}
	e.rateCleared()
	if r.err == nil {
		if cut := agent.Fit(&r.res); len(cut) > 0 {
			e.say("%s %s: %s (its whole answer: aot logs %s)", t.role, t.atom, strings.Join(cut, "; "), t.atom)
		}
		if berr := agent.CheckBounds(r.res); berr != nil {
			r.err = &agent.AttemptError{Reason: berr.Error(), Usage: r.res.Usage}
			r.res = agent.Result{}
		}
	}
	claimed := r.res.Artifacts
	conflict := false
	if r.err == nil && t.role == agent.Worker {
		if c := e.mergeOutcome(t, &r); c != "" {
			r.err = &agent.AttemptError{Reason: c, Usage: r.res.Usage}
			conflict = true
		}
	}
	e.checkWork(t, &r, claimed, denials)
	ok := r.err == nil && r.res.OK(t.role)
	if t.role == agent.Planner {
		ok = r.err == nil // a plan that proposes nothing did not fail
	}
	reason := failureReason(t.role, r)
	ev := journal.Event{Type: journal.AtomFinish, Atom: t.atom, Role: string(t.role), Attempt: t.attempt, OK: journal.Bool(ok),
		DurationMS: r.dur.Milliseconds()}
	d := usageFields(&ev, r)
	if !ok {
		ev.Reason = reason
		d.Kind = failureKind(r)
		ev = ev.With(d)
	}
	switch t.role {
	case agent.Probe:
		e.event(ev)
		e.book.Next[t.atom] = agent.Worker
		if r.err == nil && !r.res.Feasible {
			e.book.Next[t.atom] = agent.Planner
		}
		e.book.Notes[t.atom] = dag.OneLine(r.res.Findings, 2000)
		e.say("probe %s: feasible=%t %s", t.atom, r.err == nil && r.res.Feasible, dag.OneLine(r.res.Findings, 60))
		return false
	case agent.Planner:
		if ok {
			ev = ev.With(journal.AtomFinishData{Proposed: len(r.res.Atoms) + len(r.res.Decompositions)})
		}
		e.event(ev)
		e.book.Planned[t.atom] = true
		e.book.Next[t.atom] = agent.Worker
		if r.err == nil {
			e.applyPlan(t.atom, r.res)
		}
		return false
	}
	e.attemptDone(t.atom)
	if ok {
		e.claim(a.ID, claimsIn(e.readDirFor(&r), claimed))
		e.resolve(ctx, a, r.res, ev)
		return true
	}
	e.event(ev)
	// A crash, a timeout or garbage says nothing about the atom itself: it
	// is retried as it is; the probe and the planner are for an agent that
	// tried and reported failure.
	// A worker that tried and failed on an atom whose dependencies are done
	// may have failed because one of them no longer holds (a later atom
	// broke it): their checks are run first, and a broken dependency is
	// reopened instead of retrying this atom against it.
	depBroken := r.err == nil && !conflict && t.role == agent.Worker && e.brokenDependencies(ctx, a) > 0
	// A worker that said it succeeded and changed nothing tried and failed,
	// as one that reported failure did: probed, planned, counted as a stall.
	lied := failureKind(r) == string(agent.KindNoChange)
	e.infra = (r.err != nil && !conflict && !lied) || depBroken
	e.fail(a, reason)
	e.infra = false
	if conflict && !e.parked(a) {
		e.book.Next[a.ID] = agent.Worker // re-run on the merged work, no probe or planner
	}
	return true
}

// failureKind classifies a failed attempt for the journal and aot status:
// the backend's kind, or what the agent itself said.
func failureKind(r taskResult) string {
	var ae *agent.AttemptError
	switch {
	case errors.As(r.err, &ae) && ae.Kind != "":
		return string(ae.Kind)
	case r.err != nil:
		return string(agent.KindCrash)
	}
	return "reported_failure"
}

func failureReason(role agent.Role, r taskResult) string {
	if r.err != nil {
		return r.err.Error()
	}
	switch role {
	case agent.Worker:
		if s := strings.TrimSpace(r.res.Summary); s != "" {
			return "the worker reported failure: " + s
		}
		return "the worker reported failure"
	case agent.Probe:
		return "the probe found the atom not feasible: " + r.res.Findings
	}
	return "the " + string(role) + " did not succeed"
}

// resolve records a worker's success: the atom is resolved with its binding,
// parents whose children are done resolve, and a speculative group adopts
// the winner and kills the other choices.
func (e *engine) resolve(ctx context.Context, a *state.Atom, res agent.Result, ev journal.Event) {
	summary := strings.TrimSpace(res.Summary)
	if summary == "" {
		summary = "resolved by the worker"
	}
	arts := append([]string{}, res.Artifacts...)
	e.event(ev.With(journal.AtomFinishData{Summary: summary, Artifacts: arts}))
	a.Status = state.StatusResolved // in_progress -> resolved: a worker finished it
	e.bind(state.Binding{AtomID: a.ID, Summary: summary, Artifacts: arts})
	if e.unresolved > 0 && e.ix.Live(a.ID) {
		e.unresolved--
	}
	for _, id := range e.ix.Affected(a.ID) {
		if e.ix.Ready(id) {
			e.markReady(id)
		}
	}
	a.LastFailure = ""
	delete(e.book.Next, a.ID)
	delete(e.book.Waiting, a.ID)
	e.dirty = true
	e.book.Gen++
	// Progress: the stall window starts again at once, so that a stop that
	// is draining goes on instead.
	e.s.Control.StallCount = 0
	e.say("worker %s resolved in %s: %s", a.ID, time.Duration(ev.DurationMS)*time.Millisecond, dag.OneLine(summary, 60))
	if g := e.s.ORGroup(a.ORGroup); g != nil && a.ORGroup != "" {
		if g.Selected != a.ID {
			_ = dag.SwitchOR(e.s, g.Name, a.ID, "speculative: "+a.ID+" succeeded first", e.now())
			e.event(journal.Event{Atom: a.ID, Reason: "speculative winner"}.With(journal.ORSwitchData{ORGroup: g.Name}))
			e.structural()
		}
		for _, c := range g.Choices {
			if c == a.ID {
				continue
			}
			if id, running := e.busy[c]; running {
				e.kill(id, "speculative: "+a.ID+" won")
			}
		}
	}
	if len(e.s.Decompositions) == 0 || !e.ix.IsChild(a.ID) {
		return
	}
	for _, p := range dag.ResolveParents(e.s) {
		e.structural()
		e.event(journal.Event{Atom: p}.With(journal.ParentDoneData{Summary: e.s.Binding(p).Summary, Artifacts: e.s.Binding(p).Artifacts}))
		e.say("parent %s resolved: all its children are", p)
	}
}

// fail records a failed attempt and picks the next strategy: an OR choice
// backtracks to the next choice; a plain atom is probed first, then handed
// to the planner to decompose, then retried, within the attempt limit.
func (e *engine) fail(a *state.Atom, reason string) {
	a.Attempts++
	a.LastFailure = dag.OneLine(reason, 500)
	if !e.infra {
		e.book.SweepReported = true
	}
	a.Status = state.StatusPending
	e.dirty = true
	e.say("%s failed (attempt %d): %s (its output: aot logs %s)", a.ID, a.Attempts, dag.OneLine(reason, 240), a.ID)
	// An OR choice backtracks to the next choice on its first failure; the
	// last choice standing is retried like any atom before the group is
	// exhausted.
	if g := e.s.ORGroup(a.ORGroup); g != nil && a.ORGroup != "" && !(lastChoice(g, a.ID) && a.Attempts < e.maxAttempts()) {
		res, err := dag.FailOR(e.s, a.ID, reason, e.now())
		if err == nil {
			e.structural()
			if res.Exhausted {
				e.event(journal.Event{Type: journal.ORExhausted, Atom: a.ID, Reason: dag.ExhaustedReason(res.Group)})
				return
			}
			if res.Selected != a.ID {
				e.event(journal.Event{Atom: res.Selected, Reason: a.ID + " failed"}.With(journal.ORSwitchData{ORGroup: res.Group, Failed: a.ID}))
				e.say("OR group %s: %s failed, switched to %s", res.Group, a.ID, res.Selected)
			}
			return
		}
	}
	if a.Attempts >= e.maxAttempts() {
		// Out of attempts: parked. The rest of the graph goes on; the loop
		// stops on max_attempts when nothing else can run.
		delete(e.ready, a.ID)
		e.event(journal.Event{Type: journal.Parked, Atom: a.ID, Attempt: a.Attempts, Reason: fmt.Sprintf("failed %d times (max_attempts_per_atom %d)", a.Attempts, e.maxAttempts())})
		e.say("%s: out of attempts (%d); the rest of the graph goes on", a.ID, a.Attempts)
		return
	}
	switch {
	case e.infra:
		e.book.Next[a.ID] = agent.Worker
	case a.Attempts == 1:
		e.book.Next[a.ID] = agent.Probe
	case !e.book.Planned[a.ID]:
		e.book.Next[a.ID] = agent.Planner
	default:
		e.book.Next[a.ID] = agent.Worker
	}
	e.backoff(a)
}

// stopWith ends the loop at the next bounds check with a reason that has no
// check of its own.
func (e *engine) stopWith(r Reason, msg string) {
	e.halt = &Outcome{Reason: r, Message: msg}
}

// lastChoice reports whether id is the only choice of g that has not failed.
func lastChoice(g *state.ORGroup, id string) bool {
	for _, c := range g.Choices {
		if c != id && !slices.Contains(g.Failed, c) {
			return false
		}
	}
	return true
}

// runData returns what a run_start or run_resume says of the run: each
// role's agent and the confinement of their writes (nil when unknown).
func (e *engine) runData() (agents map[string]string, confinement *journal.Confinement) {
	if e.opts.Guard != nil {
		st := e.opts.Guard.Status
		confinement = &st
	}
	if len(e.opts.Agents) > 0 {
		agents = maps.Clone(e.opts.Agents)
	}
	return agents, confinement
}
