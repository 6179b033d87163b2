// Package engine is the loop's coordinator: it decides which atoms run with
// which role, how results and failures count, when to backtrack, decompose,
// verify the base case and halt on a bound. It owns those decisions and the
// bookkeeping behind them (Carry), and nothing else.
//
// The decisions are a kernel that touches no files, starts no goroutines
// and reads no wall clock: what touches the world goes through a Host, and
// a driver moves the loop on through Core's public steps (NewCore, Bounds,
// Schedule, Finish, AfterFinish, Settle, GiveUp, Wake, CancelAll, End, and
// the controls Stop, Pause, Resume, Redirect, Adopt). Two drivers run the
// same kernel: the local run (package local: goroutines, the run lock, the
// journal and the state file, hand edits, worktrees, process trees) and the
// Temporal workflow (package durable).
package engine

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// options are what a Core's decisions read beside the state: the run's
// settings and what its agents' tasks name.
type options struct {
	Settings
	Workdir      string // where agents and checks run
	StateFile    string // what the agents' tasks name
	RetryBackoff time.Duration
	MaxBackoff   time.Duration
	Agents       map[string]string    // each role's agent, journaled when the run starts
	Confinement  *journal.Confinement // the agents' confinement, journaled when the run starts
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
	// refused and retried are what the agent's CLI refused and retried
	// while it ran, as its driver heard them.
	refused []agent.Denial
	retried []string
}

type engine struct {
	// book is what the engine keeps beyond the state, handed whole to the
	// next engine of the loop (Core.Carry).
	book Carry
	host Host // what touches the world: its driver's
	// claims are the files each resolved atom's worker named, beside the
	// files its attempt changed (its binding's artifacts with isolation),
	// for the base case's failures to point at (reopen).
	claims map[string][]string
	opts   options
	s      *state.State
	tasks  map[int]*task
	busy   map[string]int // atom -> running task id
	nextID int

	expanded bool // the work graph grew in this iteration

	// Retries and sweeps (sweep.go).
	unattempted map[string]bool // executable atoms without one yet
	draining    bool            // a bound is reached: start nothing, let running agents finish
	dirty       bool
	urgent      bool    // the graph's shape changed: show the state at once (Core.Urgent)
	infra       bool    // the failure being recorded was a crash, timeout or garbage
	stop        *string // a stop was requested, with its reason
	parallel    int
	maxIter     int
	halt        *Outcome // a stop decided inside a step (usage limit)
	isoCap      int      // the parallelism the isolation mode allows, 0 = no cap
	// integration is where agents and checks read the merged work with
	// isolated workers (the integration worktree); "": the project root.
	integration string
	serial      bool // no isolation: workers one at a time unless their scopes are disjoint
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

// newEngine builds an engine with its defaults.
func newEngine(opts options, h Host) *engine {
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = DefaultRetryBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	e := &engine{
		host:        h,
		opts:        opts,
		tasks:       map[int]*task{},
		busy:        map[string]int{},
		unattempted: map[string]bool{},
		book: Carry{
			Start: h.Now(), VerifiedGen: -1, DepGen: -1,
			MaxParallel: opts.MaxParallel, MaxIterations: opts.MaxIterations,
		},
	}
	e.book.fill()
	return e
}

// ProjectRoot is the directory a loop works in: the parent of the state
// file's .claude directory, else the state file's directory.
func ProjectRoot(stateFile string) string { return state.ProjectRoot(stateFile) }

// now is the driver's clock: the engine reads no other.
func (e *engine) now() time.Time { return e.host.Now() }

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
	e.host.Say(Line(e.now().Sub(e.book.Start), fmt.Sprintf(format, args...)))
}

// Line is a progress line as people see it: msg after the time the run
// has taken, "[01:05] msg".
func Line(elapsed time.Duration, msg string) string {
	el := elapsed.Round(time.Second)
	return fmt.Sprintf("[%02d:%02d] %s", int(el.Minutes()), int(el.Seconds())%60, msg)
}

// NotReadyError lists what the state lacks before a run.
type NotReadyError struct{ Missing []string }

func (e *NotReadyError) Error() string {
	return "the loop cannot start:\n  - " + strings.Join(e.Missing, "\n  - ")
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// runData returns what a run_start or run_resume says of the run: each
// role's agent and the confinement of their writes (nil when unknown).
func (e *engine) runData() (agents map[string]string, confinement *journal.Confinement) {
	if c := e.opts.Confinement; c != nil {
		st := *c
		confinement = &st
	}
	if len(e.opts.Agents) > 0 {
		agents = maps.Clone(e.opts.Agents)
	}
	return agents, confinement
}

func nonBlank(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// readDir is where probes, planners, judges and the verifier look: the
// merged work so far.
func (e *engine) readDir() string {
	if e.integration != "" {
		return e.integration
	}
	return e.opts.Workdir
}
