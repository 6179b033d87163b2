package engine

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// structural marks a change that the state file should show at once: an OR
// switch, a decomposition, new atoms.
func (e *engine) structural() {
	e.dirty = true
	e.lastFlush = time.Time{}
	e.reshape = true
}

// rebuild recomputes the incremental view of the graph from the state.
func (e *engine) rebuild() {
	e.ix = dag.NewIndex(e.s)
	e.ready = map[string]bool{}
	e.queue = positions{height: heights(e.s, e.ix)}
	for _, a := range dag.Executable(e.s, 0) {
		if _, waits := e.book.Waiting[a.ID]; waits || e.parked(a) {
			continue
		}
		e.markReady(a.ID)
	}
	for id := range e.book.Waiting {
		if !e.ix.Ready(id) {
			delete(e.book.Waiting, id) // no longer executable: removed, switched away, decomposed
		}
	}
	e.bindIdx = make(map[string]int, len(e.s.Bindings))
	for i, b := range e.s.Bindings {
		e.bindIdx[b.AtomID] = i
	}
	e.unresolved = dag.Unresolved(e.s)
	e.reshape = false
	e.recountSweep()
}

// markReady adds an executable atom to the candidates. The queue may hold
// an atom more than once; schedule skips entries that are no longer ready,
// and an atom that is still busy is pushed again when its task ends.
func (e *engine) markReady(id string) {
	a := e.ix.Atom(id)
	if a == nil || e.parked(a) {
		return
	}
	if _, waits := e.book.Waiting[id]; waits {
		return // released by its backoff timer
	}
	e.ready[id] = true
	heap.Push(&e.queue, entry{pos: e.ix.Position(id), attempts: int32(a.Attempts)})
	if !e.book.Attempted[id] {
		e.unattempted[id] = true
	}
}

// bind sets a binding through the engine's index of bindings.
func (e *engine) bind(b state.Binding) {
	if i, ok := e.bindIdx[b.AtomID]; ok {
		b.Line = e.s.Bindings[i].Line
		e.s.Bindings[i] = b
		return
	}
	e.bindIdx[b.AtomID] = len(e.s.Bindings)
	e.s.Bindings = append(e.s.Bindings, b)
}

// positions is a heap of ready atoms: the atom with the fewest attempts
// first (a failed atom waits while others have had fewer tries), then the
// one with the longest chain of work behind it (critical path first), then
// file order.
type positions struct {
	items  []entry
	height []int32 // by position: atoms on the longest dependent chain from it
}

// entry is a queued atom with its attempts when it was queued.
type entry struct {
	pos      int
	attempts int32
}

func (p *positions) Len() int { return len(p.items) }
func (p *positions) Less(i, j int) bool {
	a, b := p.items[i], p.items[j]
	if a.attempts != b.attempts {
		return a.attempts < b.attempts
	}
	if ha, hb := p.h(a.pos), p.h(b.pos); ha != hb {
		return ha > hb
	}
	return a.pos < b.pos
}
func (p *positions) h(pos int) int32 {
	if pos < len(p.height) {
		return p.height[pos]
	}
	return 0
}
func (p *positions) Swap(i, j int) { p.items[i], p.items[j] = p.items[j], p.items[i] }
func (p *positions) Push(x any)    { p.items = append(p.items, x.(entry)) }
func (p *positions) Pop() any {
	x := p.items[len(p.items)-1]
	p.items = p.items[:len(p.items)-1]
	return x
}

// heights computes, for every atom, the number of atoms on the longest chain
// of atoms that depend on it (itself included), iteratively.
func heights(s *state.State, ix *dag.Index) []int32 {
	h := make([]int32, len(s.Atoms))
	state := make([]uint8, len(s.Atoms)) // 0 new, 1 on stack, 2 done
	type frame struct{ pos, next int }
	for root := range s.Atoms {
		if state[root] != 0 {
			continue
		}
		stack := []frame{{root, 0}}
		state[root] = 1
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			deps := ix.Dependents(s.Atoms[f.pos].ID)
			if f.next < len(deps) {
				c := ix.Position(deps[f.next])
				f.next++
				if c >= 0 && state[c] == 0 {
					state[c] = 1
					stack = append(stack, frame{c, 0})
				}
				continue
			}
			best := int32(0)
			for _, d := range deps {
				if c := ix.Position(d); c >= 0 && state[c] == 2 && h[c] > best {
					best = h[c]
				}
			}
			h[f.pos] = best + 1
			state[f.pos] = 2
			stack = stack[:len(stack)-1]
		}
	}
	return h
}

// unresolvedCount is dag.Unresolved, kept up to date between rebuilds.
func (e *engine) unresolvedCount() int {
	if e.reshape || e.unresolved < 0 {
		e.rebuild()
	}
	return e.unresolved
}

// applyPlan adds a planner's atoms and decompositions. Each is applied on its
// own; an invalid one is skipped and journaled, never half-applied. They may
// refer to each other in any order: new atoms to the children of a
// decomposition, children to new atoms, new atoms to each other. What fails
// only for a dependency not added yet is tried again once something else was
// added; cycles and unknown ids are still refused.
func (e *engine) applyPlan(forAtom string, res agent.Result) int {
	n := 0
	decs := res.Decompositions
	props := res.Atoms
	decErrs := make([]error, len(decs))
	atomErrs := make([]error, len(props))
	for {
		added := 0
		var laterD []agent.PlannedDecomposition
		var laterDErr []error
		for _, d := range decs {
			kids := make([]state.Atom, 0, len(d.Children))
			for _, c := range d.Children {
				kids = append(kids, state.Atom{ID: c.ID, Description: c.Description, DependsOn: c.DependsOn})
			}
			parent := d.Parent
			if parent == "" {
				parent = forAtom
			}
			if _, err := dag.Decompose(e.s, parent, kids, nonBlank(d.Reason, "planner: "+parent+" failed")); err != nil {
				laterD, laterDErr = append(laterD, d), append(laterDErr, err)
				continue
			}
			e.event(journal.Event{Atom: parent, OK: journal.Bool(true)}.With(journal.DecomposeData{Children: ids(kids)}))
			e.say("planner split %s into %s", parent, strings.Join(ids(kids), ", "))
			added++
		}
		batch := make([]state.Atom, len(props))
		for i, p := range props {
			batch[i] = state.Atom{ID: p.ID, Description: p.Description, DependsOn: p.DependsOn, ORGroup: p.ORGroup}
		}
		var laterA []agent.PlannedAtom
		var laterAErr []error
		for i, err := range dag.AddAtoms(e.s, batch) {
			p := props[i]
			if err != nil {
				laterA, laterAErr = append(laterA, p), append(laterAErr, err)
				continue
			}
			e.event(journal.Event{Type: journal.AddAtom, Atom: p.ID, OK: journal.Bool(true)})
			e.say("planner added %s: %s", p.ID, dag.OneLine(p.Description, 60))
			added++
		}
		n += added
		decs, decErrs, props, atomErrs = laterD, laterDErr, laterA, laterAErr
		if added == 0 || len(decs)+len(props) == 0 {
			break
		}
	}
	for i, d := range decs {
		parent := nonBlank(d.Parent, forAtom)
		e.event(journal.Event{Type: journal.Decompose, Atom: parent, OK: journal.Bool(false), Reason: decErrs[i].Error()})
		e.say("planner's split of %s refused: %v", parent, decErrs[i])
	}
	for i, p := range props {
		e.event(journal.Event{Type: journal.AddAtom, Atom: p.ID, OK: journal.Bool(false), Reason: atomErrs[i].Error()})
		e.say("planner's atom %s refused: %v", p.ID, atomErrs[i])
	}
	if n > 0 {
		e.expanded = true
		e.structural()
	}
	return n
}

func ids(list []state.Atom) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.ID
	}
	return out
}

func nonBlank(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// verify runs the base case itself; an agent's word is never proof. Judged
// checks go to the agent in the judge role, unless judges is false (then
// they count as not passed). A verification is reused while nothing changed
// since it ran.
func (e *engine) verify(ctx context.Context, judges bool) (bool, []string, error) {
	if e.book.VerifiedGen == e.book.Gen && judges {
		return false, e.book.VerifyFails, nil
	}
	e.say("verifying the base case")
	if err := e.host.Flush(); err != nil {
		return false, nil, err
	}
	rep, err := e.host.Checks(ctx, judges)
	if e.stop != nil || ctx.Err() != nil {
		if e.stop == nil {
			r := interruption(ctx)
			e.stop = &r
		}
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("base case: %w", err)
	}
	failures := Failures(rep)
	e.event(journal.Event{OK: journal.Bool(rep.Passed)}.With(journal.VerifyData{Failures: failures, Checklist: rep.Checklist, Outputs: CheckOutputDir(e.opts.StateFile)}))
	if rep.Passed {
		e.say("base case passed")
	} else {
		e.say("base case failed: %s", dag.OneLine(strings.Join(failures, "; "), 100))
		if judges {
			e.book.VerifiedGen, e.book.VerifyFails = e.book.Gen, failures
		}
	}
	return rep.Passed, failures, nil
}

// stoppable runs a step that blocks the loop (verification, planning) with
// a context that a stop request cancels, so aot stop works there too.
func (e *engine) stoppable(ctx context.Context, fn func(context.Context)) {
	sctx, cancel := context.WithCancel(ctx)
	stopped := make(chan string, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		e.watchStop(sctx, cancel, stopped)
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
func (e *engine) watchStop(ctx context.Context, cancel context.CancelFunc, stopped chan<- string) {
	t := time.NewTicker(e.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s, err := e.store.Read(); err == nil && s.Control.StopRequested {
				stopped <- nonBlank(deref(s.Control.StopReason), "aot stop")
				cancel()
				return
			}
		}
	}
}

// Failures lists what a verification found failing, one line each:
// nested items under their group's name, judged checks nobody judged.
func Failures(rep verify.Report) []string {
	failures := collectFailures(rep.Checklist, "")
	for _, sk := range rep.Skipped {
		failures = append(failures, fmt.Sprintf("%s: not judged: %s", sk.Item, sk.Reason))
	}
	return failures
}

func collectFailures(items []verify.ItemResult, prefix string) []string {
	var out []string
	for _, it := range items {
		if it.Passed || it.NeedsJudge {
			continue
		}
		name := prefix + it.Item
		if len(it.GroupResults)+len(it.AnyOfResults) > 0 {
			sub := collectFailures(append(it.GroupResults, it.AnyOfResults...), name+" / ")
			if len(sub) > 0 {
				out = append(out, sub...)
				continue
			}
		}
		out = append(out, name+": "+dag.OneLine(it.Evidence, 300))
	}
	return out
}

// plan asks the planner for new atoms after the base case failed with
// nothing left to do. What it adds is the next iteration's work.
func (e *engine) plan(ctx context.Context, forAtom string, failures []string) {
	t := agent.Task{
		Role:      agent.Planner,
		Atom:      agent.AtomRef{ID: "base_case", Description: "the base case failed; propose atoms that fix it", DependsOn: []string{}},
		Objective: agent.Objective{Goal: e.s.Objective.Goal, BackgroundIntent: e.s.Objective.BackgroundIntent, Deliverables: e.s.Objective.Deliverables, DefinitionOfDone: e.s.Objective.DefinitionOfDone},
		Bindings:  map[string]agent.Binding{},
		Workdir:   e.readDir(),
		Attempt:   e.s.Control.Iteration + 1,
		StateFile: e.opts.StateFile,
		Failures:  failures,
	}
	e.event(journal.Event{Type: journal.AtomStart, Atom: "base_case", Role: string(agent.Planner)})
	res, err, dur := e.host.RunAgent(ctx, t)
	e.addUsage(res.Usage, err)
	ev := journal.Event{Type: journal.AtomFinish, Atom: "base_case", Role: string(agent.Planner), OK: journal.Bool(err == nil), DurationMS: dur.Milliseconds()}
	usageFields(&ev, taskResult{res: res, err: err})
	if err != nil {
		ev.Reason = err.Error()
		e.event(ev)
		e.say("planner failed: %v", err)
		return
	}
	e.event(ev)
	if e.applyPlan(forAtom, res) == 0 {
		e.say("the planner proposed nothing usable")
	}
}

// endIteration evaluates a sweep or a verification round: fewer unresolved
// atoms than when it began is progress; the same count is a stall; more,
// because the graph was expanded, is tolerated max_stall_count times in a
// row and then counts as a stall.
func (e *engine) endIteration() string {
	c := &e.s.Control
	c.Iteration++
	u := e.unresolvedCount()
	prev := e.book.SweepStart
	max := e.s.Objective.Constraints.MaxStallCount
	kind := "progress"
	switch {
	case u < prev:
		c.StallCount = 0
		e.book.Expands = 0
	case u > prev && e.expanded:
		e.book.Expands++
		kind = "expansion"
		if max > 0 && e.book.Expands > max {
			c.StallCount++
			kind = "stall"
		}
	case len(e.book.Attempted) > 0 && !e.book.SweepReported:
		// Only crashes, timeouts or garbage: they say nothing about whether
		// the work can be done, and are bounded per atom by
		// max_attempts_per_atom.
		kind = "retry"
	default:
		c.StallCount++
		e.book.Expands = 0
		kind = "stall"
	}
	c.PrevPendingCount = u
	e.expanded = false
	e.dirty = true
	data := journal.IterationData{Unresolved: journal.Ref(u), UnresolvedBefore: journal.Ref(prev), StallCount: c.StallCount, Attempted: journal.Ref(len(e.book.Attempted))}
	if e.repairSweep() {
		e.book.Repairs++
		data.Repair = true
	}
	e.event(journal.Event{Iteration: c.Iteration, Reason: kind}.With(data))
	if kind == "stall" {
		e.event(journal.Event{Iteration: c.Iteration}.With(journal.StallData{StallCount: c.StallCount, Unresolved: u}))
		e.say("iteration %d: no progress (stall %d of %d)", c.Iteration, c.StallCount, max)
	}
	return kind
}

// kill cancels a running task; its result will be discarded and its atom
// returns to pending.
func (e *engine) kill(id int, why string) {
	t := e.tasks[id]
	if t == nil || t.discarded {
		return
	}
	t.discarded = true
	e.host.Cancel(t.id)
	if a := e.ix.Atom(t.atom); a != nil && a.Status == state.StatusInProgress {
		a.Status = state.StatusPending
		e.dirty = true
		if e.ix.Ready(a.ID) {
			e.markReady(a.ID)
		}
	}
	e.event(journal.Event{Type: journal.AtomReset, Atom: t.atom, Role: string(t.role), Attempt: t.attempt, Reason: why})
}

// killAll kills every running agent and waits for their processes to end.
func (e *engine) killAll(why string) {
	for _, id := range e.taskIDs() {
		e.kill(id, why)
	}
	if len(e.tasks) > 0 {
		e.host.Drain(context.Background())
	}
}

// taskIDs lists the tasks in flight in the order they started.
func (e *engine) taskIDs() []int {
	ids := make([]int, 0, len(e.tasks))
	for id := range e.tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (e *engine) syncJournal() error { return e.host.Sync() }

// fileStamp identifies a version of the state file cheaply: the same file
// (inode), size and modification time.
type fileStamp struct {
	fi os.FileInfo
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi: fi}
}

func (a fileStamp) equal(b fileStamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == nil && b.fi == nil
	}
	return os.SameFile(a.fi, b.fi) && a.fi.Size() == b.fi.Size() && a.fi.ModTime().Equal(b.fi.ModTime())
}

// errChangedBehind aborts a write when the state file changed since the
// engine last looked: the change is handled first.
var errChangedBehind = errors.New("the state file changed behind the engine's back")

// flush syncs the journal, then writes the in-memory state to the file under
// the store's lock. A stop requested in the file meanwhile is kept and
// honoured.
func (e *engine) flush() error {
	if !stampOf(e.opts.StateFile).equal(e.stamp) {
		if err := e.external(); err != nil {
			return err
		}
	}
	if !e.dirty {
		return nil
	}
	if err := e.jr.Sync(); err != nil {
		return err
	}
	written := state.Clone(e.s)
	_, err := e.store.UpdateBatch(func(fs *state.State) error {
		if !stampOf(e.opts.StateFile).equal(e.stamp) {
			return errChangedBehind // changed since the check above
		}
		if fs.Control.StopRequested && e.stop == nil {
			r := nonBlank(deref(fs.Control.StopReason), "aot stop")
			e.stop = &r
		}
		stopReq, stopReason := fs.Control.StopRequested, fs.Control.StopReason
		state.CopyInto(fs, state.Clone(written))
		if stopReq && e.s.Control.Status == state.ControlRunning {
			fs.Control.StopRequested = true
			fs.Control.StopReason = stopReason
		}
		return nil
	})
	if err != nil {
		var pe *state.ParseError
		if errors.Is(err, errChangedBehind) || errors.Is(err, state.ErrNotExist) || errors.As(err, &pe) {
			// Deleted or broken between the check above and the write:
			// handled like any change behind the engine's back.
			e.stamp = fileStamp{}
			return e.external()
		}
		return fmt.Errorf("write state: %w", err)
	}
	e.stamp = e.writtenStamp()
	e.lastWritten = written
	e.dirty = false
	e.lastFlush = e.now()
	e.event(journal.Event{}.With(e.checkpointData()))
	return nil
}

// poll looks for a stop in the state file and for redirect requests.
func (e *engine) poll(ctx context.Context) error {
	if !stampOf(e.opts.StateFile).equal(e.stamp) {
		if err := e.external(); err != nil {
			return err
		}
	}
	if e.jr != nil {
		if err := e.jr.Verify(); err != nil {
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
func (e *engine) finish(out *Outcome) error {
	if e.halt != nil && out.Reason == "" {
		*out = e.outcome(e.halt.Reason, e.halt.Message)
	}
	e.killAll("the loop stopped: " + string(out.Reason))
	if e.book.Paused != nil {
		e.book.Paused = nil
		_ = os.Remove(pausePath(e.opts.StateFile))
	}
	e.conclude(out, e.land(context.Background(), out))
	err := e.flush()
	if cerr := e.jr.Close(); err == nil {
		err = cerr
	}
	e.say("halted: %s: %s", out.Reason, out.Message)
	if err != nil {
		return err
	}
	return nil
}

// conclude records how the loop ended in the state and the journal, once
// nothing runs any more; landing says where the merged work is.
func (e *engine) conclude(out *Outcome, landing string) {
	if e.halt != nil && out.Reason == "" {
		*out = e.outcome(e.halt.Reason, e.halt.Message)
	}
	e.killAll("the loop stopped: " + string(out.Reason))
	e.book.Paused = nil
	c := &e.s.Control
	if out.Reason == Completed {
		c.Status = state.ControlCompleted
		c.StopReason = nil
	} else {
		c.Status = state.ControlStopped
		msg := out.Message
		c.StopReason = &msg
	}
	c.StopRequested = false
	waits, failures := out.Waits, out.Failures
	*out = e.outcome(out.Reason, out.Message)
	out.Waits, out.Failures, out.Landing = waits, failures, landing
	if landing != "" {
		e.say("%s", landing)
	}
	e.event(journal.Event{Reason: string(out.Reason)}.With(journal.StopData{Message: out.Message, ExitCode: out.ExitCode}))
	e.dirty = true
}

// replay re-applies worker results that reached the journal but not the
// state file before a crash: every successful worker finish after the last
// checkpoint whose atom is not resolved yet. It returns how many it applied.
func (e *engine) replay(events []journal.Event) int {
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

// checkJSON is the check a judge gets, in the state file's own field names.
func checkJSON(c *state.Check) map[string]any {
	if c == nil {
		return nil
	}
	m := map[string]any{"type": c.Type}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set("value", c.Value)
	set("criteria", c.Criteria)
	set("scope", c.Scope)
	set("timeout", c.Timeout)
	if c.PassThreshold != nil {
		m["pass_threshold"] = *c.PassThreshold
	}
	if len(c.Rubric) > 0 {
		var rubric []map[string]any
		for _, r := range c.Rubric {
			item := map[string]any{"criterion": r.Criterion}
			if r.Description != "" {
				item["description"] = r.Description
			}
			if r.Weight != 0 {
				item["weight"] = r.Weight
			}
			for _, l := range r.Levels {
				levels, _ := item["levels"].([]map[string]any)
				item["levels"] = append(levels, map[string]any{"score": l.Score, "text": l.Text})
			}
			rubric = append(rubric, item)
		}
		m["rubric"] = rubric
	}
	return m
}
