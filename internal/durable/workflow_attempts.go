package durable

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// schedule starts attempts on executable atoms while slots are free: the
// atom with the fewest attempts first (a failed atom waits while others
// have had fewer tries), then file order.
func (l *loop) schedule(ctx workflow.Context) {
	free := l.parallel - l.agentsRunning()
	if free <= 0 || l.paused != nil || l.draining || l.continuing || l.halt != nil ||
		l.s.Control.Status != state.ControlRunning || workflow.Now(ctx).Before(l.quotaUntil) {
		return
	}
	for free > 0 && l.queue.Len() > 0 {
		it := heap.Pop(&l.queue).(entry)
		if it.pos >= len(l.s.Atoms) {
			continue
		}
		a := &l.s.Atoms[it.pos]
		if _, running := l.busy[a.ID]; running || !l.ready[a.ID] {
			continue // a stale entry
		}
		if a.Attempts != it.attempts {
			heap.Push(&l.queue, entry{pos: it.pos, attempts: a.Attempts})
			continue // queued before its last failure
		}
		delete(l.ready, a.ID)
		if !l.ix.Ready(a.ID) || l.parked(a) {
			continue
		}
		l.launch(ctx, a)
		free--
	}
}

// launch starts an attempt activity on the integration branch's head.
func (l *loop) launch(ctx workflow.Context, a *state.Atom) {
	l.nextSeq++
	n := a.Attempts + 1
	t := &attempt{seq: l.nextSeq, atom: a.ID, n: n, branch: fmt.Sprintf("aot/%s/%s-%d", l.id, a.ID, n), started: workflow.Now(ctx)}
	a.Status = state.StatusInProgress // pending -> in_progress: a is executable
	actx, cancel := workflow.WithCancel(ctx)
	t.cancel = cancel
	in := AttemptInput{Loop: l.id, Repo: l.in.Repo, BaseCommit: l.head, Branch: t.branch, Task: l.taskFor(a, n), Agent: l.in.Agent, Timeout: l.agentTimeout()}
	t.fut = workflow.ExecuteActivity(workflow.WithActivityOptions(actx, l.attemptOptions()), AttemptActivity, in)
	l.tasks[t.seq] = t
	l.busy[a.ID] = t.seq
	l.dirty = true
}

// taskFor builds what the agent gets, as the engine's: the atom, the
// objective, and only the bindings of the atom's dependencies. Workdir and
// StateFile are the worker's to set.
func (l *loop) taskFor(a *state.Atom, n int) agent.Task {
	o := l.s.Objective
	t := agent.Task{
		Role:        agent.Worker,
		Atom:        agent.AtomRef{ID: a.ID, Description: a.Description, DependsOn: append([]string{}, a.DependsOn...), ORGroup: a.ORGroup},
		Objective:   agent.Objective{Goal: o.Goal, BackgroundIntent: o.BackgroundIntent, Deliverables: o.Deliverables, DefinitionOfDone: o.DefinitionOfDone},
		Bindings:    map[string]agent.Binding{},
		Attempt:     n,
		LastFailure: a.LastFailure,
	}
	for _, d := range a.DependsOn {
		if i, ok := l.bindIdx[d]; ok {
			b := &l.s.Bindings[i]
			t.Bindings[d] = agent.Binding{Summary: b.Summary, Artifacts: append([]string{}, b.Artifacts...)}
		}
	}
	return t
}

// attemptEnded integrates an attempt activity's result.
func (l *loop) attemptEnded(ctx workflow.Context, t *attempt) {
	if t.fut == nil {
		return
	}
	var r AttemptResult
	err := t.fut.Get(ctx, &r)
	t.fut = nil
	l.finished++
	l.dirty = true
	if t.discarded || temporal.IsCanceledError(err) {
		if err == nil {
			l.addUsage(r)
		}
		l.drop(t)
		return
	}
	if err != nil {
		// Temporal's retries are spent: the infrastructure failed, not the
		// agent. Counted like the engine's crash: an attempt, not a stall.
		l.unknown++
		l.fail(ctx, t, "the worker failed: "+dag.OneLine(err.Error(), 400), true)
		return
	}
	l.addUsage(r)
	a := l.ix.Atom(t.atom)
	if a == nil {
		l.drop(t)
		return
	}
	switch {
	case r.Result.UsageLimit:
		l.drop(t)
		l.usageLimit(ctx, t.atom, r.Result)
		return
	case r.Kind == agent.KindRateLimit:
		// Not the atom's fault: back untouched, the loop waits a little.
		l.drop(t)
		l.quotaUntil = workflow.Now(ctx).Add(rateLimitWait)
		return
	case r.Kind != "" && r.Kind != reportedFailure:
		l.fail(ctx, t, failureText(r), true)
		return
	case !r.Result.Success:
		l.fail(ctx, t, failureText(r), false)
		return
	}
	if berr := agent.CheckBounds(r.Result); berr != nil {
		l.fail(ctx, t, berr.Error(), true)
		return
	}
	if r.Commit == "" {
		l.resolve(ctx, t, r.Result) // nothing changed: nothing to merge
		return
	}
	t.res = &r
	l.merges = append(l.merges, t.seq)
}

func failureText(r AttemptResult) string {
	if s := strings.TrimSpace(r.Reason); s != "" {
		return s
	}
	if s := strings.TrimSpace(r.Result.Summary); s != "" {
		return "the worker reported failure: " + s
	}
	if r.Kind != "" && r.Kind != reportedFailure {
		return string(r.Kind)
	}
	return "the worker reported failure"
}

func (l *loop) addUsage(r AttemptResult) {
	if r.Unknown {
		l.unknown++
	}
	l.usage.InputTokens += r.Result.Usage.InputTokens
	l.usage.OutputTokens += r.Result.Usage.OutputTokens
	l.usage.CostUSD += r.Result.Usage.CostUSD
}

// usageLimit handles the provider's quota answer as the engine does: wait
// for its reset when the agent gave one within max_wall_time, else stop.
func (l *loop) usageLimit(ctx workflow.Context, atom string, res agent.Result) {
	msg := "usage_limit: the agent reported its provider's usage limit (on " + atom + ")"
	at, err := time.Parse(time.RFC3339, res.RetryAt)
	switch {
	case res.RetryAt == "":
		l.halt = ptr(outcomeOf(engine.UsageLimit, msg+"; it gave no reset time (retry_at), so the loop stops; aot run resumes it"))
	case err != nil:
		l.halt = ptr(outcomeOf(engine.UsageLimit, fmt.Sprintf("%s; its retry_at %q is not an RFC 3339 time", msg, res.RetryAt)))
	case l.wallTime() > 0 && at.Sub(workflow.Now(ctx)) > l.wallTime()-l.active(workflow.Now(ctx)):
		l.halt = ptr(outcomeOf(engine.UsageLimit, msg+" until "+at.Format(time.RFC3339)+", after this run's max_wall_time; aot run after that resumes it"))
	case at.After(l.quotaUntil):
		l.quotaUntil = at
	}
}

func ptr[T any](v T) *T { return &v }

// startMerge merges the next successful attempt's branch, one at a time.
// An atom starts only once its dependencies are resolved, and resolved
// means merged, so the merges follow the dependency order.
func (l *loop) startMerge(ctx workflow.Context) {
	for l.merging == nil && len(l.merges) > 0 {
		t := l.tasks[l.merges[0]]
		l.merges = l.merges[1:]
		if t == nil {
			continue
		}
		if t.discarded {
			l.drop(t)
			continue
		}
		l.merging = t
		in := MergeInput{Repo: l.in.Repo, Base: l.in.Base, Branch: t.branch, Atom: t.atom}
		l.mergeF = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, mergeOptions()), MergeActivity, in)
	}
}

// mergeEnded integrates a merge: the new head, and the atom resolved; a
// conflict is a failed attempt, retried on the new head.
func (l *loop) mergeEnded(ctx workflow.Context) {
	t := l.merging
	var m MergeResult
	err := l.mergeF.Get(ctx, &m)
	l.merging, l.mergeF = nil, nil
	l.finished++
	l.dirty = true
	switch {
	case err != nil:
		l.fail(ctx, t, "merge: "+dag.OneLine(err.Error(), 400), true)
	case m.Conflict:
		if m.Commit != "" {
			l.head = m.Commit
		}
		l.fail(ctx, t, fmt.Sprintf("merge conflict with the integration branch (%s); retried on its new head", strings.Join(m.Files, ", ")), false)
	default:
		l.head = m.Commit
		if t.discarded || l.ix.Atom(t.atom) == nil {
			l.drop(t)
			return
		}
		l.resolve(ctx, t, t.res.Result)
	}
}

// drop forgets an attempt whose result does not count; its atom, if still
// in progress, goes back to pending, not charged.
func (l *loop) drop(t *attempt) {
	delete(l.tasks, t.seq)
	if l.busy[t.atom] == t.seq {
		delete(l.busy, t.atom)
		if a := l.ix.Atom(t.atom); a != nil && a.Status == state.StatusInProgress {
			a.Status = state.StatusPending
		}
		l.markReady(t.atom)
	}
}

// kill cancels an attempt in flight; its result will be discarded and its
// atom goes back to pending at once. A merge in flight is left to finish.
func (l *loop) kill(t *attempt, why string) {
	if t == nil || t.discarded || t == l.merging {
		return
	}
	t.discarded = true
	if t.cancel != nil {
		t.cancel()
	}
	if l.busy[t.atom] == t.seq {
		delete(l.busy, t.atom)
		if a := l.ix.Atom(t.atom); a != nil && a.Status == state.StatusInProgress {
			a.Status = state.StatusPending
			l.dirty = true
		}
		l.markReady(t.atom)
	}
	if t.fut == nil {
		delete(l.tasks, t.seq) // waiting for its merge only
	}
}

// settle ends an attempt that counts (a success or a failure): it leaves
// the attempts in flight and the sweep has seen its atom, which it returns
// (nil when the atom is gone).
func (l *loop) settle(t *attempt) *state.Atom {
	delete(l.tasks, t.seq)
	if l.busy[t.atom] == t.seq {
		delete(l.busy, t.atom)
	}
	a := l.ix.Atom(t.atom)
	if a != nil {
		l.attemptDone(a.ID)
	}
	return a
}

// resolve records a success, as the engine's: resolved with its binding,
// parents whose children are done resolve, the stall window restarts.
func (l *loop) resolve(ctx workflow.Context, t *attempt, res agent.Result) {
	a := l.settle(t)
	if a == nil {
		return
	}
	summary := strings.TrimSpace(res.Summary)
	if summary == "" {
		summary = "resolved by the worker"
	}
	var arts []string
	for _, p := range res.Artifacts {
		if strings.TrimSpace(p) != "" {
			arts = append(arts, p)
		}
	}
	a.Status = state.StatusResolved // in_progress -> resolved: its dependencies were resolved when it started
	l.bind(state.Binding{AtomID: a.ID, Summary: summary, Artifacts: append([]string{}, arts...)})
	if l.unresolved > 0 && l.ix.Live(a.ID) {
		l.unresolved--
	}
	a.LastFailure = ""
	delete(l.waiting, a.ID)
	l.s.Control.StallCount = 0
	for _, id := range l.ix.Affected(a.ID) {
		l.markReady(id)
	}
	if len(l.s.Decompositions) > 0 && l.ix.IsChild(a.ID) && len(dag.ResolveParents(l.s)) > 0 {
		l.reshape = true
	}
}

// fail records a failed attempt and what comes next, as the engine's fail:
// an OR choice backtracks to the next choice (the last one standing is
// retried like any atom first); an atom out of attempts is parked; any
// other waits out a backoff while other atoms get the slots. infra says the
// failure was the machinery's (crash, timeout, garbage), which does not
// make a sweep a stall.
func (l *loop) fail(ctx workflow.Context, t *attempt, reason string, infra bool) {
	a := l.settle(t)
	if a == nil {
		return
	}
	a.Attempts++
	a.LastFailure = dag.OneLine(reason, 500)
	a.Status = state.StatusPending
	if !infra {
		l.sweepReported = true
	}
	if g := l.s.ORGroup(a.ORGroup); g != nil && a.ORGroup != "" && !(onlyChoiceLeft(g, a.ID) && a.Attempts < l.maxAttempts()) {
		if _, err := dag.FailOR(l.s, a.ID, reason, workflow.Now(ctx)); err == nil {
			l.reshape = true
			return // exhausted: control is stopped, bounds end the loop
		}
	}
	if a.Attempts >= l.maxAttempts() {
		delete(l.ready, a.ID) // parked: the rest of the graph goes on
		return
	}
	d := engine.DefaultRetryBackoff
	for i := 1; i < a.Attempts && d < engine.DefaultMaxBackoff; i++ {
		d *= 2
	}
	l.waiting[a.ID] = workflow.Now(ctx).Add(min(d, engine.DefaultMaxBackoff))
	delete(l.ready, a.ID)
}

// onlyChoiceLeft reports whether id is the only choice of g that has not
// failed.
func onlyChoiceLeft(g *state.ORGroup, id string) bool {
	return !slices.ContainsFunc(g.Choices, func(c string) bool { return c != id && !slices.Contains(g.Failed, c) })
}

func (l *loop) maxAttempts() int {
	if m := l.s.Objective.Constraints.MaxAttemptsPerAtom; m > 0 {
		return m
	}
	return engine.DefaultMaxAttemptsPerAtom
}

// parked reports whether an atom has used up max_attempts_per_atom.
func (l *loop) parked(a *state.Atom) bool {
	return a.Status == state.StatusPending && a.Attempts >= l.maxAttempts() && l.ix.Live(a.ID)
}

// release makes the atoms whose backoff has ended ready again.
func (l *loop) release(ctx workflow.Context) {
	now := workflow.Now(ctx)
	var due []string
	for id, until := range l.waiting {
		if !now.Before(until) {
			due = append(due, id)
		}
	}
	slices.Sort(due)
	for _, id := range due {
		delete(l.waiting, id)
		l.markReady(id)
	}
}

// rebuild recomputes the incremental view of the graph from the state.
func (l *loop) rebuild() {
	l.ix = dag.NewIndex(l.s)
	l.ready = map[string]bool{}
	l.queue = readyQueue{}
	var gone []string
	for id := range l.waiting {
		if !l.ix.Ready(id) {
			gone = append(gone, id) // removed, switched away, decomposed
		}
	}
	for _, id := range gone {
		delete(l.waiting, id)
	}
	for i := range l.s.Atoms {
		l.markReady(l.s.Atoms[i].ID)
	}
	l.bindIdx = make(map[string]int, len(l.s.Bindings))
	for i, b := range l.s.Bindings {
		l.bindIdx[b.AtomID] = i
	}
	l.unresolved = dag.Unresolved(l.s)
	l.reshape = false
	l.recountSweep()
}

// markReady queues an atom when it is executable and free to start.
func (l *loop) markReady(id string) {
	a := l.ix.Atom(id)
	if a == nil || l.ready[id] || !l.ix.Ready(id) || l.parked(a) {
		return
	}
	if _, waits := l.waiting[id]; waits {
		return
	}
	if _, running := l.busy[id]; running {
		return
	}
	l.ready[id] = true
	heap.Push(&l.queue, entry{pos: l.ix.Position(id), attempts: a.Attempts})
	if l.attempted != nil && !l.attempted[id] {
		l.unattempted[id] = true
	}
}

// bind sets a binding through the index of bindings.
func (l *loop) bind(b state.Binding) {
	if i, ok := l.bindIdx[b.AtomID]; ok {
		b.Line = l.s.Bindings[i].Line
		l.s.Bindings[i] = b
		return
	}
	l.bindIdx[b.AtomID] = len(l.s.Bindings)
	l.s.Bindings = append(l.s.Bindings, b)
}

// readyQueue is a heap of ready atoms: fewest attempts first, then file
// order.
type readyQueue []entry

type entry struct {
	pos      int
	attempts int
}

func (q readyQueue) Len() int { return len(q) }
func (q readyQueue) Less(i, j int) bool {
	if q[i].attempts != q[j].attempts {
		return q[i].attempts < q[j].attempts
	}
	return q[i].pos < q[j].pos
}
func (q readyQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *readyQueue) Push(x any)   { *q = append(*q, x.(entry)) }
func (q *readyQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
