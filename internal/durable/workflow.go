package durable

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
	"github.com/aot-loop/aot/internal/workspace"
)

// The workflow drives the local engine's own decisions (engine.Core: the
// same code aot run executes) and carries out their effects the Temporal
// way: each agent attempt (worker, probe, planner) is an activity on an aot
// worker, the merges of workers' branches into the integration branch are
// activities of their own (one under way at a time, merging every success
// that waits, in the order the agents finished, which is dependency order:
// an atom starts only once its dependencies are merged), and so is each
// verification of the base case (judge included).
// Its clock is workflow.Now, its waits are timers and selectors, and
// nothing depends on the order of a map, so it replays deterministically.

// Workflow defaults.
const (
	DefaultContinueAfter = 2000
	historyLimit         = 10000 // events in one run before it continues as new
	attemptMargin        = 10 * time.Minute
	attemptHeartbeat     = 30 * time.Second
	drainWait            = time.Minute
	// eventRing is how many journal events the workflow keeps for the
	// status query.
	eventRing = 512
	// reportedFailure is the kind an activity may give an agent's own "no";
	// empty with Success false means the same.
	reportedFailure agent.Kind = "reported_failure"
)

// RegisterWorkflow registers the loop workflow under WorkflowName.
func RegisterWorkflow(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(Loop, workflow.RegisterOptions{Name: WorkflowName})
}

// attempt is one attempt activity in flight, then its merge.
type attempt struct {
	engine.Attempt
	branch    string
	fut       workflow.Future // the attempt activity; nil once its result is in
	cancel    workflow.CancelFunc
	discarded bool           // the Core cancelled it: its result is ignored
	res       *AttemptResult // a worker succeeded with a commit: waiting for its merge
	// lostHolder is the task queue of the worker that held its commit and
	// did not take its merge (held.go); the merge is then tried from the
	// atom's branch.
	lostHolder string
}

type loop struct {
	in   LoopInput
	id   string
	ctx  workflow.Context // where the host's activities run; disconnected once the workflow is cancelled
	root workflow.Context
	core *engine.Core
	head string

	tasks    map[int]*attempt
	merges   []int      // attempts waiting for their merge, in the order their agents finished
	merging  *attempt   // the merge under way, one at a time (workflows before "merge-batch")
	batch    []*attempt // the merges under way in one MergeBatch activity
	mergeF   workflow.Future
	gone     map[string]bool // the own queues of workers that did not take their merges (held.go)
	finished int             // activities finished in this run

	continuing bool
	ending     bool // the loop is stopping: redirects are refused
	// deciding is set while the Core makes a decision that waits for an
	// activity (a verification, the planner): a redirect waits for it to
	// end, as a local engine takes redirects between its steps.
	deciding     bool
	disconnected bool // the workflow was cancelled: l.ctx is disconnected from it
	outcome      *Outcome

	named activityIDs // the activity ids given in this run (activity_ids.go)

	events   []journal.Event // the last eventRing events
	eventSeq int
	logs     []AgentLog // the agents' last logs (logs.go)
	logSeq   int

	pauseCh, resumeCh, stopCh workflow.ReceiveChannel
	wake                      workflow.Channel
	timerAt                   time.Time
	timerF                    workflow.Future
	timerCancel               workflow.CancelFunc
}

// Loop is the workflow of one loop, registered as WorkflowName. It returns
// the loop's Outcome (never an error for a stop of the loop itself), or a
// ContinueAsNewError with the loop so far.
func Loop(ctx workflow.Context, in LoopInput) (Outcome, error) {
	s, err := state.Parse(in.State)
	if err != nil {
		return outcomeOf(engine.Failed, "the loop's state: "+err.Error()), nil
	}
	l := &loop{
		in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID, ctx: ctx, root: ctx, head: in.BaseCommit,
		tasks:    map[int]*attempt{},
		eventSeq: in.Carry.Events,
		logs:     in.Carry.Logs,
		logSeq:   in.Carry.LogSeq,
		pauseCh:  workflow.GetSignalChannel(ctx, SignalPause),
		resumeCh: workflow.GetSignalChannel(ctx, SignalResume),
		stopCh:   workflow.GetSignalChannel(ctx, SignalStop),
		wake:     workflow.NewBufferedChannel(ctx, 1),
	}
	if in.Carry.Head != "" {
		l.head = in.Carry.Head
	}
	l.core = engine.NewCore(s, engine.CoreOptions{Settings: in.Settings,
		Workdir: in.Project, StateFile: in.StateFile, Agents: in.Agent.describe(), Carry: in.Carry.Core,
	}, l)
	if err := l.register(ctx); err != nil {
		return Outcome{}, err
	}
	return l.run(ctx)
}

// run is the coordinator's loop, as the engine's: schedule, wait,
// integrate, evaluate, until a bound, a stop or the end of this run's
// share of history.
func (l *loop) run(ctx workflow.Context) (Outcome, error) {
	c := l.core
	for {
		l.controls()
		l.cancelled(ctx)
		if out, done := c.Bounds(); done {
			l.decide(func() { out = c.GiveUp(context.Background(), out) })
			return l.finish(out), nil
		}
		c.Schedule(context.Background())
		l.startMerge()
		if !l.continuing && l.shouldContinue(ctx) {
			l.continuing = true
			c.Hold(true) // what runs finishes, then the loop continues as new
		}
		if l.continuing && c.InFlight() == 0 {
			return Outcome{}, l.continueAsNew(ctx)
		}
		if !l.continuing && c.Quiet() {
			var out engine.Outcome
			var done bool
			l.decide(func() { out, done = c.Settle(context.Background()) })
			if done {
				return l.finish(out), nil
			}
			continue
		}
		l.wait(ctx)
		var out engine.Outcome
		var done bool
		l.decide(func() { out, done = c.AfterFinish(context.Background()) })
		if done {
			return l.finish(out), nil
		}
	}
}

// decide runs one of the Core's steps with redirects held off.
func (l *loop) decide(fn func()) {
	was := l.deciding
	l.deciding = true
	fn()
	l.deciding = was
}

// cancelled turns the workflow's cancellation (aot stop) into a stop of
// the Core; the activities that remain (cancelling attempts, the last
// projection) run on a disconnected context.
func (l *loop) cancelled(ctx workflow.Context) {
	if !l.disconnect() {
		return
	}
	l.controls() // an aot stop's reason, sent just before
	l.core.Stop("the workflow was cancelled (aot stop)")
}

// disconnect moves the host's activities to a context the workflow's
// cancellation does not reach, once it came; it reports whether it did so
// now.
func (l *loop) disconnect() bool {
	if l.root.Err() == nil || l.disconnected {
		return false
	}
	l.disconnected = true
	l.ctx, _ = workflow.NewDisconnectedContext(l.root)
	return true
}

// wait blocks until something happens: an activity ends, a signal or an
// update arrives, a timer fires (a backoff, a quota reset, max_wall_time,
// or the workflow is cancelled.
func (l *loop) wait(ctx workflow.Context) {
	sel := workflow.NewSelector(ctx)
	for _, id := range l.ids() {
		t := l.tasks[id]
		if t.fut != nil {
			sel.AddFuture(t.fut, func(workflow.Future) { l.attemptEnded(t) })
		}
	}
	if l.mergeF != nil {
		sel.AddFuture(l.mergeF, func(workflow.Future) { l.mergeEnded() })
	}
	sel.AddReceive(l.pauseCh, func(workflow.ReceiveChannel, bool) { l.controls() })
	sel.AddReceive(l.resumeCh, func(workflow.ReceiveChannel, bool) { l.controls() })
	sel.AddReceive(l.stopCh, func(workflow.ReceiveChannel, bool) { l.controls() })
	sel.AddReceive(l.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
	if !l.core.Stopping() {
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	}
	if f := l.timer(ctx); f != nil {
		sel.AddFuture(f, func(workflow.Future) { l.timerF, l.timerAt = nil, time.Time{} })
	}
	sel.Select(ctx)
	// Whatever else has ended meanwhile is integrated at once.
	for _, id := range l.ids() {
		if t := l.tasks[id]; t != nil && t.fut != nil && t.fut.IsReady() {
			l.attemptEnded(t)
		}
	}
	if l.mergeF != nil && l.mergeF.IsReady() {
		l.mergeEnded()
	}
}

// timer keeps one timer for the next deadline the loop waits for.
func (l *loop) timer(ctx workflow.Context) workflow.Future {
	now := workflow.Now(ctx)
	next := l.core.Wake()
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

// ids lists the attempts in flight in the order they started.
func (l *loop) ids() []int { return slices.Sorted(maps.Keys(l.tasks)) }

// The Core's host.

func (l *loop) Now() time.Time { return workflow.Now(l.ctx) }

func (l *loop) Event(ev journal.Event) {
	l.eventSeq++
	if len(l.events) == eventRing {
		l.events = append(l.events[:0], l.events[1:]...)
	}
	l.events = append(l.events, ev)
}

func (l *loop) Say(line string) { workflow.GetLogger(l.ctx).Info(line) }

// Start runs an attempt activity on the integration branch's head. A
// worker pushes its work to the attempt's branch; probes and planners
// only read.
func (l *loop) Start(_ context.Context, a engine.Attempt) {
	t := &attempt{Attempt: a}
	t.Started = workflow.Now(l.ctx)
	if a.Role == agent.Worker {
		t.branch = fmt.Sprintf("aot/%s/%s-%d", l.id, a.Atom, a.N)
	}
	actx, cancel := workflow.WithCancel(l.ctx)
	t.cancel = cancel
	in := AttemptInput{Loop: l.id, Repo: l.in.Repo, BaseCommit: l.head, Branch: t.branch, Task: a.Task, Agent: l.in.Agent, Timeout: l.agentTimeout()}
	in.Hold = a.Role == agent.Worker && l.holds()
	t.fut = workflow.ExecuteActivity(workflow.WithActivityOptions(actx, named(l.attemptOptions(), l.activityID(attemptName(a)))), AttemptActivity, in)
	l.tasks[a.ID] = t
}

// Cancel cancels an attempt: its activity (the worker kills the agent), or
// its merge while queued. A merge under way is left to finish.
func (l *loop) Cancel(id int) {
	t := l.tasks[id]
	if t == nil || t.discarded {
		return
	}
	t.discarded = true
	if t.fut != nil && t.cancel != nil {
		t.cancel()
	}
}

// Drain waits for the cancelled attempts: each activity's end (the worker
// acknowledges that its agent is killed), bounded by drainWait.
func (l *loop) Drain(context.Context) {
	l.disconnect()
	deadline := workflow.Now(l.ctx).Add(drainWait)
	for _, id := range l.ids() {
		t := l.tasks[id]
		if t == nil || !t.discarded {
			continue
		}
		if t.fut != nil {
			left := deadline.Sub(workflow.Now(l.ctx))
			if left <= 0 {
				continue
			}
			ok, err := workflow.AwaitWithTimeout(l.ctx, left, func() bool { return t.fut.IsReady() })
			if err != nil && l.disconnect() {
				// The workflow was cancelled meanwhile: wait on, out of
				// its reach.
				ok, _ = workflow.AwaitWithTimeout(l.ctx, max(deadline.Sub(workflow.Now(l.ctx)), time.Millisecond), func() bool { return t.fut.IsReady() })
			}
			if !ok {
				continue
			}
			l.attemptEnded(t)
			continue
		}
		if t != l.merging && !slices.Contains(l.batch, t) {
			l.done(t, engine.Finished{Err: &agent.AttemptError{Kind: agent.KindCancelled, Reason: "cancelled before its merge"}})
		}
	}
	if l.merging != nil && l.merging.discarded || slices.ContainsFunc(l.batch, func(t *attempt) bool { return t.discarded }) {
		l.mergeEnded()
	}
}

// Checks verifies the base case on the integration branch's head, on a
// worker.
func (l *loop) Checks(_ context.Context, judges bool) (verify.Report, error) {
	in := VerifyInput{Repo: l.in.Repo, Commit: l.head, State: state.Marshal(l.core.State()), Project: l.in.Project,
		Judge: judges, Agent: l.in.Agent, Timeout: l.agentTimeout(), CheckTimeout: l.in.CheckTimeout, Loop: l.id, StateFile: l.in.StateFile}
	var v VerifyResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(l.ctx, named(l.verifyOptions(), l.counted("verify"))), VerifyActivity, in).Get(l.ctx, &v)
	l.finished++
	if err != nil {
		if temporal.IsCanceledError(err) {
			l.cancelled(l.ctx)
		}
		return verify.Report{}, err
	}
	l.keepJudgeLogs(v.Logs)
	for _, ev := range v.Events {
		l.Event(ev)
	}
	l.core.Spent(v.Usage, v.Unknown)
	return v.Report, nil
}

// RunAgent runs one agent as an attempt activity and waits for it (the
// base case's planner).
func (l *loop) RunAgent(_ context.Context, t agent.Task) (agent.Result, error, time.Duration) {
	start := workflow.Now(l.ctx)
	in := AttemptInput{Loop: l.id, Repo: l.in.Repo, BaseCommit: l.head, Task: t, Agent: l.in.Agent, Timeout: l.agentTimeout()}
	var r AttemptResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(l.ctx, named(l.attemptOptions(), l.counted(string(t.Role)))), AttemptActivity, in).Get(l.ctx, &r)
	l.finished++
	l.refused(r)
	l.keepLog(r.Log)
	f := finishedOf(r, err)
	return f.Result, f.Err, workflow.Now(l.ctx).Sub(start)
}

// A workflow's history holds its events and state already, and its
// queries show a pause: nothing more to make durable or visible.
func (l *loop) Sync() error                       { return nil }
func (l *loop) Flush() error                      { return nil }
func (l *loop) ShowPause(*engine.PauseInfo) error { return nil }

// Results.

// attemptEnded takes an attempt activity's result: a worker's success with
// a commit waits for its merge; anything else is the Core's at once.
func (l *loop) attemptEnded(t *attempt) {
	if t.fut == nil {
		return
	}
	var r AttemptResult
	err := t.fut.Get(l.ctx, &r)
	t.fut = nil
	l.finished++
	l.refused(r)
	l.keepLog(r.Log)
	worked := err == nil && !t.discarded && t.Role == agent.Worker && r.Kind == "" && r.Result.OK(agent.Worker) && agent.CheckBounds(r.Result) == nil
	// A worker that changed none of the files it claimed is judged before
	// its merge, as in a local run: what it did change is merged nowhere.
	liar := r.ClaimsUnchanged && engine.ExpectsChanges(l.core.State().Atom(t.Atom))
	if worked && r.Commit != "" && !liar {
		t.res = &r
		l.merges = append(l.merges, t.ID)
		if l.freeSlotAtPush() {
			// Its agent is done: another may start while its merge waits.
			l.core.Merging(t.ID)
		}
		return
	}
	f := finishedOf(r, err)
	if worked {
		// It changed nothing (or nothing it claimed): the Core sees it as
		// a local run's merge of nothing, with what the agent claimed.
		f.Merge = &workspace.Merge{Changed: r.Files, Unclaimed: r.Unclaimed, Missing: r.Missing}
	}
	l.done(t, f)
}

// finishedOf turns an attempt activity's end into the Core's terms: a
// failure the agent's backend classified is an *agent.AttemptError; an
// activity error (Temporal's retries spent: a worker or the repository
// failed, not the agent) is a crash.
func finishedOf(r AttemptResult, err error) engine.Finished {
	r.Result.Usage.Known = !r.Unknown
	switch {
	case temporal.IsCanceledError(err):
		return engine.Finished{Err: &agent.AttemptError{Kind: agent.KindCancelled, Reason: "cancelled; the worker killed the agent"}}
	case err != nil:
		return engine.Finished{Err: &agent.AttemptError{Kind: agent.KindCrash, Reason: "the worker failed: " + dag.OneLine(err.Error(), 400)}}
	case r.Kind != "" && r.Kind != reportedFailure:
		return engine.Finished{Result: r.Result, Err: &agent.AttemptError{Kind: r.Kind, Reason: failureText(r), Usage: r.Result.Usage, RetryAfter: r.RetryAfter}}
	}
	return engine.Finished{Result: r.Result}
}

func failureText(r AttemptResult) string {
	if s := strings.TrimSpace(r.Reason); s != "" {
		return s
	}
	if s := strings.TrimSpace(r.Result.Summary); s != "" {
		return "the worker reported failure: " + s
	}
	return string(r.Kind)
}

// done hands an attempt's end to the Core.
func (l *loop) done(t *attempt, f engine.Finished) {
	delete(l.tasks, t.ID)
	f.Dur = workflow.Now(l.ctx).Sub(t.Started)
	if f.Branch == "" {
		f.Branch = t.branch
	}
	l.decide(func() { l.core.Finish(context.Background(), t.ID, f) })
}

// startMerge merges the successful attempts' branches: all those waiting
// in one MergeBatch activity, or (workflows started before batches) the
// next one alone.
func (l *loop) startMerge() {
	if len(l.merges) > 0 && l.batched() {
		if l.mergeF == nil {
			l.startBatch()
		}
		return
	}
	for l.merging == nil && len(l.merges) > 0 {
		t := l.tasks[l.merges[0]]
		l.merges = l.merges[1:]
		if t == nil {
			continue
		}
		if t.discarded {
			l.done(t, engine.Finished{Err: &agent.AttemptError{Kind: agent.KindCancelled, Reason: "cancelled before its merge"}})
			continue
		}
		l.merging = t
		in := MergeInput{Repo: l.in.Repo, Base: l.in.Base, Branch: t.branch, Atom: t.Atom, Loop: l.id, Attempt: t.N,
			Message: t.res.Result.Summary, Project: l.in.Project, StateFile: l.in.StateFile}
		l.mergeF = workflow.ExecuteActivity(workflow.WithActivityOptions(l.ctx, named(mergeOptions(), l.activityID(fmt.Sprintf("merge/%s/%d", t.Atom, t.N)))), MergeActivity, in)
	}
}

// mergeEnded takes a merge's result: the new head, and the attempt's end
// for the Core (a conflict fails the attempt; it is re-run on the new
// head).
func (l *loop) mergeEnded() {
	if l.batch != nil {
		l.batchEnded()
		return
	}
	t := l.merging
	var m MergeResult
	err := l.mergeF.Get(l.ctx, &m)
	l.merging, l.mergeF = nil, nil
	l.finished++
	if err != nil {
		l.done(t, engine.Finished{Err: &agent.AttemptError{Kind: agent.KindCrash, Reason: "merge: " + dag.OneLine(err.Error(), 400), Usage: t.res.Result.Usage}})
		return
	}
	if m.Commit != "" {
		l.head = m.Commit
	}
	l.done(t, engine.Finished{Result: t.res.Result, Merge: &workspace.Merge{Commit: m.Commit, Conflict: m.Conflict, ConflictFiles: m.Files,
		Changed: t.res.Files, Unclaimed: t.res.Unclaimed, Missing: t.res.Missing}})
}

// landMerges finishes the merges a stop finds queued or under way, so
// that the state says what the integration branch holds.
func (l *loop) landMerges() {
	for {
		if l.mergeF == nil {
			l.startMerge()
		}
		if l.mergeF == nil {
			return
		}
		l.mergeEnded()
	}
}

// continueAsNew hands the loop to a new run of the workflow: the state as
// it is (nothing in flight) and the Core's bookkeeping.
func (l *loop) continueAsNew(ctx workflow.Context) error {
	next := l.in
	next.State = state.Marshal(l.core.State())
	cy := l.core.Carry()
	next.Carry = Carry{Core: &cy, Runs: l.in.Carry.Runs + 1, Head: l.head, Events: l.eventSeq, Logs: l.logs, LogSeq: l.logSeq}
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

// finish records how the loop ended, as the engine's finish: merges under
// way land, what still runs is cancelled, the state says stopped or
// completed, and the attached aot run gets the last projection.
func (l *loop) finish(out engine.Outcome) Outcome {
	l.ending = true
	l.disconnect()
	if out.Reason != engine.ManualStop {
		l.landMerges()
	} else if l.mergeF != nil {
		l.mergeEnded()
	}
	out = l.core.End(out, "the merged work is on branch "+l.in.Base+" of "+l.in.Repo)
	l.cleanBranches()
	o := Outcome{Reason: string(out.Reason), ExitCode: out.ExitCode, Message: out.Message, Run: &out}
	l.outcome = &o
	return o
}

// cleanBranches deletes the atoms' branches the loop leaves on the remote
// (a stop's queued merges, attempts cancelled after their push): only the
// integration branch stays. Workflows started before this step replay
// without it.
func (l *loop) cleanBranches() {
	if workflow.GetVersion(l.ctx, "clean-branches", workflow.DefaultVersion, 1) < 1 || l.in.Repo == "" {
		return
	}
	in := CleanInput{Repo: l.in.Repo, Prefix: "aot/" + l.id + "/", Keep: l.in.Base}
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(l.ctx, named(cleanOptions(), l.activityID("clean"))), CleanActivity, in).Get(l.ctx, nil)
	if err != nil {
		l.Say("the atoms' branches could not be deleted from " + l.in.Repo + ": " + err.Error())
	}
}

func outcomeOf(r engine.Reason, msg string) Outcome {
	return Outcome{Reason: string(r), ExitCode: r.ExitCode(), Message: msg}
}

// describe names each role's agent for the run_start event, as aot run's.
func (a AgentChoice) describe() map[string]string {
	if a.Agent == "" && len(a.Roles) == 0 {
		return nil
	}
	out := map[string]string{}
	if a.Agent != "" {
		d := a.Agent
		if a.Model != "" {
			d += " (model " + a.Model + ")"
		}
		out["all"] = d
	}
	for r, v := range a.Roles {
		out[r] = v
	}
	return out
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
// is a result, counted against max_attempts_per_atom by the Core.
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

func cleanOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 3},
	}
}

func (l *loop) verifyOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: l.agentTimeout() + attemptMargin + l.checksTime(),
		HeartbeatTimeout:    attemptHeartbeat,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 3},
	}
}

var errEnded = errors.New("the loop has ended")
