package engine

import (
	"container/heap"
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/workspace"
)

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

// structural marks a change that the state file should show at once: an OR
// switch, a decomposition, new atoms.
func (e *engine) structural() {
	e.dirty = true
	e.urgent = true
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

// unresolvedCount is dag.Unresolved, kept up to date between rebuilds.
func (e *engine) unresolvedCount() int {
	if e.reshape || e.unresolved < 0 {
		e.rebuild()
	}
	return e.unresolved
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
func (e *engine) taskIDs() []int { return slices.Sorted(maps.Keys(e.tasks)) }

// mayStart reports whether a worker on a may start beside the workers
// running now: never when their declared scopes overlap; without isolation,
// only when every running worker and a declare scopes and none overlap.
func (e *engine) mayStart(a *state.Atom) bool {
	if role := e.book.Next[a.ID]; role != "" && role != agent.Worker {
		return true // probes and planners only read
	}
	for _, t := range e.tasks {
		if t.discarded || t.role != agent.Worker {
			continue
		}
		r := e.ix.Atom(t.atom)
		if r == nil {
			continue
		}
		if e.serial && (len(a.Scope) == 0 || len(r.Scope) == 0) {
			return false
		}
		if len(a.Scope) > 0 && len(r.Scope) > 0 && workspace.Overlap(a.Scope, r.Scope) {
			return false
		}
	}
	return true
}
