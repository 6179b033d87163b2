package durable

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// The workflow makes the local engine's decisions (engine/engine.go,
// sweep.go, steps.go) over the same pure packages, state and dag: which
// atoms run, in what order, how failures count, when OR groups backtrack,
// when a bound stops the loop. Everything that touches the world is an
// activity: the agent attempts, the merges into the integration branch,
// the base case's verification, the projection into the attached client's
// state file. The workflow code itself is deterministic under replay: its
// clock is workflow.Now, its waits are timers and selectors, and nothing
// depends on the order of a map.

// Workflow defaults.
const (
	DefaultContinueAfter = 2000
	historyLimit         = 10000 // events in one run before it continues as new
	attemptMargin        = 10 * time.Minute
	attemptHeartbeat     = 30 * time.Second
	projectEvery         = 2 * time.Second
	rateLimitWait        = 30 * time.Second
	// reportedFailure is the kind an activity may give an agent's own "no";
	// empty with Success false means the same.
	reportedFailure agent.Kind = "reported_failure"
)

// RegisterWorkflow registers the loop workflow under WorkflowName.
func RegisterWorkflow(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(Loop, workflow.RegisterOptions{Name: WorkflowName})
}

// attempt is one agent attempt in flight, then its merge.
type attempt struct {
	seq       int
	atom      string
	n         int
	branch    string
	started   time.Time
	fut       workflow.Future // the attempt activity; nil once its result is in
	cancel    workflow.CancelFunc
	discarded bool           // cancelled by a redirect, a pause or a stop: its result is ignored
	res       *AttemptResult // the agent succeeded with a commit: waiting for its merge
}

// pause is a person's hold on the loop.
type pause struct {
	since  time.Time
	kill   bool
	reason string
}

type loop struct {
	in   LoopInput
	id   string
	s    *state.State
	head string

	// Incremental view of the graph (as the engine's), rebuilt when its
	// shape changes.
	ix         *dag.Index
	reshape    bool
	ready      map[string]bool
	queue      readyQueue
	bindIdx    map[string]int
	unresolved int

	tasks   map[int]*attempt
	busy    map[string]int // atom -> seq of its attempt
	nextSeq int
	waiting map[string]time.Time // atom -> end of its backoff
	merges  []int                // attempts waiting for their merge, in the order their agents finished
	merging *attempt
	mergeF  workflow.Future

	usage      agent.Usage
	unknown    int
	started    time.Time
	pausedFor  time.Duration
	paused     *pause
	startIter  int
	parallel   int
	maxIter    int
	quotaUntil time.Time

	// Sweeps (engine/sweep.go).
	attempted     map[string]bool
	unattempted   map[string]bool
	sweepStart    int
	sweepReported bool

	draining   bool
	halt       *Outcome
	continuing bool
	finished   int  // activities finished in this run
	gen        int  // bumped by every redirect
	ending     bool // the loop is stopping: redirects are refused

	pauseCh, resumeCh workflow.ReceiveChannel
	wake              workflow.Channel
	timerAt           time.Time
	timerF            workflow.Future
	timerCancel       workflow.CancelFunc
	dirty             bool
	projF             workflow.Future
	lastProject       time.Time
	outcome           *Outcome
}

// Loop is the workflow of one loop, registered as WorkflowName. It returns
// the loop's Outcome (never an error for a stop of the loop itself), or a
// ContinueAsNewError with the loop so far.
func Loop(ctx workflow.Context, in LoopInput) (Outcome, error) {
	l, err := newLoop(ctx, in)
	if err != nil {
		return Outcome{Reason: string(engine.Failed), ExitCode: engine.Failed.ExitCode(), Message: err.Error()}, nil
	}
	if err := l.register(ctx); err != nil {
		return Outcome{}, err
	}
	return l.run(ctx)
}

func newLoop(ctx workflow.Context, in LoopInput) (*loop, error) {
	s, err := state.Parse(in.State)
	if err != nil {
		return nil, fmt.Errorf("the loop's state: %w", err)
	}
	now := workflow.Now(ctx)
	l := &loop{
		in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID, s: s, head: in.BaseCommit,
		tasks: map[int]*attempt{}, busy: map[string]int{}, waiting: map[string]time.Time{},
		usage: in.Carry.Usage, unknown: in.Carry.Unknown, started: in.Carry.Started, pausedFor: in.Carry.PausedFor,
		startIter: in.Carry.StartIteration,
		pauseCh:   workflow.GetSignalChannel(ctx, SignalPause),
		resumeCh:  workflow.GetSignalChannel(ctx, SignalResume),
		wake:      workflow.NewBufferedChannel(ctx, 1),
		dirty:     true,
	}
	l.usage.Known = true
	if in.Carry.Head != "" {
		l.head = in.Carry.Head
	}
	if in.Carry.Paused {
		l.paused = &pause{since: in.Carry.PausedSince, kill: in.Carry.PauseKill, reason: in.Carry.PauseReason}
	}
	if in.Carry.Runs == 0 {
		// The loop's first run: as the engine's begin.
		l.started = now
		l.startIter = s.Control.Iteration
		for i := range s.Atoms {
			if s.Atoms[i].Status == state.StatusInProgress {
				s.Atoms[i].Status = state.StatusPending // orphaned by an earlier run
			}
		}
		if s.Control.Status == state.ControlStopped || s.Control.Status == state.ControlCompleted {
			s.Control.StallCount = 0 // a person ran the loop again
		}
		s.Control.Status = state.ControlRunning
		s.Control.StopRequested = false
		s.Control.StopReason = nil
		s.Control.RedirectRequested = false
	}
	l.applyBounds()
	l.rebuild()
	l.newSweep()
	return l, nil
}

// applyBounds takes the run's bounds from the constraints and the input, as
// the engine's applyBounds.
func (l *loop) applyBounds() {
	c := l.s.Objective.Constraints
	l.parallel = c.MaxParallelAgents
	if l.in.MaxParallel > 0 {
		l.parallel = l.in.MaxParallel
	}
	if l.parallel <= 0 {
		l.parallel = state.DefaultMaxParallelAgents
	}
	l.maxIter = c.MaxIterations
	if l.in.MaxIterations > 0 {
		l.maxIter = l.startIter + l.in.MaxIterations
	}
}

// run is the coordinator: schedule, wait, integrate, evaluate, until a
// bound, a stop or the end of this run's share of history.
func (l *loop) run(ctx workflow.Context) (Outcome, error) {
	for {
		l.controls(ctx)
		if ctx.Err() != nil {
			return l.stop(ctx), nil
		}
		if out, done := l.bounds(ctx); done {
			l.landMerges(ctx, true)
			return l.finish(ctx, l.giveUp(ctx, out)), nil
		}
		if l.reshape {
			l.rebuild()
		}
		l.release(ctx)
		l.schedule(ctx)
		l.startMerge(ctx)
		if !l.continuing && l.shouldContinue(ctx) {
			l.continuing = true
		}
		if l.continuing && l.inFlight() == 0 {
			return Outcome{}, l.continueAsNew(ctx)
		}
		if l.inFlight() == 0 && !l.continuing && !l.waitingForTime(ctx) && l.paused == nil {
			if out, done := l.idle(ctx); done {
				return l.finish(ctx, out), nil
			}
			continue
		}
		l.project(ctx)
		l.wait(ctx)
	}
}

// inFlight counts the activities the loop waits for: attempts (discarded
// ones too, until their cancellation is in) and merges.
func (l *loop) inFlight() int { return len(l.tasks) }

// agentsRunning counts the attempts whose agent runs: the parallel slots
// in use.
func (l *loop) agentsRunning() int {
	n := 0
	for _, t := range l.tasks {
		if !t.discarded && t.res == nil && t.fut != nil {
			n++
		}
	}
	return n
}

func (l *loop) waitingForTime(ctx workflow.Context) bool {
	return len(l.waiting) > 0 || workflow.Now(ctx).Before(l.quotaUntil)
}

// seqs returns the attempts in flight in the order they started.
func (l *loop) seqs() []int {
	out := make([]int, 0, len(l.tasks))
	for seq := range l.tasks {
		out = append(out, seq)
	}
	slices.Sort(out)
	return out
}

// wait blocks until something happens: an activity ends, a signal or an
// update arrives, a timer fires (a backoff, max_wall_time, a quota reset,
// the next projection), or the workflow is cancelled.
func (l *loop) wait(ctx workflow.Context) {
	sel := workflow.NewSelector(ctx)
	for _, seq := range l.seqs() {
		t := l.tasks[seq]
		if t.fut != nil {
			sel.AddFuture(t.fut, func(workflow.Future) { l.attemptEnded(ctx, t) })
		}
	}
	if l.mergeF != nil {
		sel.AddFuture(l.mergeF, func(workflow.Future) { l.mergeEnded(ctx) })
	}
	sel.AddReceive(l.pauseCh, func(workflow.ReceiveChannel, bool) { l.controls(ctx) })
	sel.AddReceive(l.resumeCh, func(workflow.ReceiveChannel, bool) { l.controls(ctx) })
	sel.AddReceive(l.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	if l.projF != nil && l.dirty {
		sel.AddFuture(l.projF, func(workflow.Future) { l.projF = nil })
	}
	if f := l.timer(ctx); f != nil {
		sel.AddFuture(f, func(workflow.Future) { l.timerF, l.timerAt = nil, time.Time{} })
	}
	sel.Select(ctx)
	// Whatever else has ended meanwhile is integrated at once.
	for _, seq := range l.seqs() {
		if t := l.tasks[seq]; t != nil && t.fut != nil && t.fut.IsReady() {
			l.attemptEnded(ctx, t)
		}
	}
	if l.mergeF != nil && l.mergeF.IsReady() {
		l.mergeEnded(ctx)
	}
	if l.checkSweep() {
		l.dirty = true
	}
}

// timer keeps one timer for the next deadline the loop waits for.
func (l *loop) timer(ctx workflow.Context) workflow.Future {
	now := workflow.Now(ctx)
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, until := range l.waiting {
		earlier(until)
	}
	if now.Before(l.quotaUntil) {
		earlier(l.quotaUntil)
	}
	if d := l.wallTime(); d > 0 && l.paused == nil {
		earlier(now.Add(d - l.active(now)))
	}
	if l.dirty && l.in.ProjectionQueue != "" && l.projF == nil {
		earlier(l.lastProject.Add(projectEvery))
	}
	if next.IsZero() {
		return l.timerF
	}
	if !next.After(now) {
		next = now.Add(time.Millisecond)
	}
	if l.timerF == nil || next.Before(l.timerAt) {
		if l.timerCancel != nil {
			l.timerCancel()
		}
		tctx, cancel := workflow.WithCancel(ctx)
		l.timerF, l.timerAt, l.timerCancel = workflow.NewTimer(tctx, next.Sub(now)), next, cancel
	}
	return l.timerF
}

// continueAsNew hands the loop to a new run of the workflow: the state as
// it is (nothing in flight), the spend and the clocks.
func (l *loop) continueAsNew(ctx workflow.Context) error {
	next := l.in
	next.State = state.Marshal(l.s)
	next.Carry = Carry{
		Usage: l.usage, Unknown: l.unknown, Started: l.started, PausedFor: l.pausedFor,
		Runs: l.in.Carry.Runs + 1, Head: l.head, StartIteration: l.startIter,
	}
	if p := l.paused; p != nil {
		next.Carry.Paused, next.Carry.PausedSince, next.Carry.PauseKill, next.Carry.PauseReason = true, p.since, p.kill, p.reason
	}
	return workflow.NewContinueAsNewError(ctx, WorkflowName, next)
}

// shouldContinue reports whether this run has made enough history.
func (l *loop) shouldContinue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= historyLimit {
		return true
	}
	limit := l.in.ContinueAfter
	if limit <= 0 {
		limit = DefaultContinueAfter
	}
	return l.finished >= limit
}

// stop ends a cancelled workflow (aot stop): the running attempts are
// cancelled with it, the state records the stop.
func (l *loop) stop(ctx workflow.Context) Outcome {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	l.landMerges(dctx, false)
	for _, seq := range l.seqs() {
		t := l.tasks[seq]
		l.kill(t, "manual stop")
		if t.fut != nil {
			_ = t.fut.Get(dctx, nil) // the worker acknowledges: its agent is killed
		}
	}
	return l.finish(dctx, outcomeOf(engine.ManualStop, "manual stop: the workflow was cancelled (aot stop)"))
}

// landMerges finishes the merges a stop finds under way, so that the state
// says what the integration branch holds: the merge in flight always, the
// queued ones too unless a person stopped the loop.
func (l *loop) landMerges(ctx workflow.Context, queued bool) {
	for {
		if l.mergeF == nil && queued {
			l.startMerge(ctx)
		}
		if l.mergeF == nil {
			return
		}
		l.mergeEnded(ctx)
	}
}

// finish records how the loop ended in the state, as the engine's finish.
func (l *loop) finish(ctx workflow.Context, out Outcome) Outcome {
	l.ending = true
	for _, seq := range l.seqs() {
		l.kill(l.tasks[seq], "the loop stopped: "+out.Reason)
	}
	c := &l.s.Control
	if out.Reason == string(engine.Completed) {
		c.Status = state.ControlCompleted
		c.StopReason = nil
	} else {
		c.Status = state.ControlStopped
		msg := out.Message
		c.StopReason = &msg
	}
	c.StopRequested = false
	l.paused = nil
	l.outcome = &out
	l.dirty = true
	if l.in.ProjectionQueue != "" {
		// The last projection is waited for (briefly): it is what the
		// attached aot run leaves in the state file.
		_ = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, projectionOptions(l.in.ProjectionQueue)), ProjectionActivity, l.status(ctx)).Get(ctx, nil)
	}
	return out
}

func outcomeOf(r engine.Reason, msg string) Outcome {
	return Outcome{Reason: string(r), ExitCode: r.ExitCode(), Message: msg}
}

// Activity options.

func (l *loop) agentTimeout() time.Duration {
	if l.in.AgentTimeout > 0 {
		return l.in.AgentTimeout
	}
	return engine.DefaultAgentTimeout
}

// attemptOptions: an activity error is infrastructure (a worker died, the
// repository was unreachable) and Temporal retries it; an agent's failure
// is a result, counted against max_attempts_per_atom by the workflow.
func (l *loop) attemptOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: l.agentTimeout() + attemptMargin,
		HeartbeatTimeout:    attemptHeartbeat,
		WaitForCancellation: true,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 3},
	}
}

// mergeOptions and verifyOptions: the activities heartbeat too, so that a
// dead worker's merge or verification is retried elsewhere within
// attemptHeartbeat, not after its whole timeout.
func mergeOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    attemptHeartbeat,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 5},
	}
}

func (l *loop) verifyOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: l.agentTimeout() + attemptMargin,
		HeartbeatTimeout:    attemptHeartbeat,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 3},
	}
}

// projectionOptions: best effort, no retries; a client that went away
// costs one short timeout.
func projectionOptions(queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToCloseTimeout: 10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	}
}
