package engine

import (
	"encoding/json"
	"regexp"
	"slices"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// A redirect (aot redirect, or a hand edit of the state file taken as one)
// is validated before anything is stopped, and stops only what the change
// invalidates: adding atoms or changing bounds stops nothing; removing an
// atom, changing its dependencies or description, clearing its binding or
// redoing it stops that atom and its dependents; selecting another OR choice
// stops the old choice and its dependents; an objective change stops
// everything. New bounds apply at once.

// change validates a person's change and adopts it; it returns the atoms
// whose agents it stopped. A refused change leaves the loop as it was.
func (e *engine) change(c Change) ([]string, error) {
	work := state.Clone(e.s)
	if err := Apply(work, c, e.now()); err != nil {
		e.event(journal.Event{OK: journal.Bool(false), Reason: c.Reason}.With(journal.RedirectData{Error: err.Error()}))
		return nil, err
	}
	// Bounds a person sets now win over this run's flags.
	if c.MaxParallelAgents != nil {
		e.book.MaxParallel = 0
	}
	if c.MaxIterations != nil {
		e.book.MaxIterations = 0
	}
	stopped := e.adopt(work, "redirect: "+c.Reason)
	e.event(journal.Event{OK: journal.Bool(true), Reason: c.Reason}.With(journal.RedirectData{Stopped: &stopped}))
	return stopped, nil
}

// adopt makes next the loop's state: the agents whose work next invalidates
// are killed, the others go on; bounds and the stall window start afresh.
// It returns the atoms whose agents were stopped.
func (e *engine) adopt(next *state.State, why string) []string {
	all, hit := invalidated(e.s, next, e.ix)
	var kill []int
	var stopped []string
	for _, id := range e.taskIDs() {
		if t := e.tasks[id]; !t.discarded && (all || hit[t.atom]) {
			kill = append(kill, id)
			stopped = append(stopped, t.atom)
		}
	}
	// Running agents that go on keep their atoms in progress.
	for _, t := range e.tasks {
		if t.discarded || all || hit[t.atom] {
			continue
		}
		if a := next.Atom(t.atom); a != nil && a.Status == state.StatusPending && t.role == agent.Worker {
			a.Status = state.StatusInProgress
		}
	}
	state.CopyInto(e.s, next)
	e.structural()
	e.rebuild()
	for _, id := range kill {
		e.kill(id, why)
	}
	if all {
		e.book.Next = map[string]agent.Role{}
		e.book.Planned = map[string]bool{}
		e.book.Notes = map[string]string{}
		e.book.Waiting = map[string]time.Time{}
	} else {
		for id := range hit {
			delete(e.book.Next, id)
			delete(e.book.Planned, id)
			delete(e.book.Notes, id)
			delete(e.book.Waiting, id)
		}
	}
	e.book.Gen++
	e.book.VerifiedGen = -1
	e.halt = nil
	e.draining = false
	e.s.Control.StallCount = 0
	e.book.Expands = 0
	e.applyBounds()
	e.rebuild()
	e.newSweep()
	e.s.Control.PrevPendingCount = e.unresolved
	slices.Sort(stopped)
	return stopped
}

// invalidated compares the state before and after a change: all is true when
// the objective changed; hit holds the atoms whose running work the change
// makes useless, with everything that depends on them.
func invalidated(before, after *state.State, ix interface{ Dependents(string) []string }) (all bool, hit map[string]bool) {
	hit = map[string]bool{}
	ob, oa := before.Objective, after.Objective
	if ob.Goal != oa.Goal || ob.BackgroundIntent != oa.BackgroundIntent || ob.Deliverables != oa.Deliverables ||
		ob.DefinitionOfDone != oa.DefinitionOfDone || baseCaseKey(ob.BaseCase) != baseCaseKey(oa.BaseCase) {
		return true, hit
	}
	var roots []string
	for i := range before.Atoms {
		b := &before.Atoms[i]
		a := after.Atom(b.ID)
		switch {
		case a == nil:
			roots = append(roots, b.ID)
		case a.Description != b.Description || a.ORGroup != b.ORGroup || !slices.Equal(a.DependsOn, b.DependsOn):
			roots = append(roots, b.ID)
		case b.Status == state.StatusResolved && a.Status != state.StatusResolved:
			roots = append(roots, b.ID) // redone: what was built on it is stale
		}
	}
	for _, bb := range before.Bindings {
		ab := after.Binding(bb.AtomID)
		if ab == nil || ab.Summary != bb.Summary || !slices.Equal(ab.Artifacts, bb.Artifacts) {
			roots = append(roots, bb.AtomID)
		}
	}
	for _, g := range before.ORGroups {
		if ag := after.ORGroup(g.Name); g.Selected != "" && (ag == nil || ag.Selected != g.Selected) {
			roots = append(roots, g.Selected)
		}
	}
	// Everything downstream of a root, through the graph as it was.
	for len(roots) > 0 {
		id := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if hit[id] {
			continue
		}
		hit[id] = true
		roots = append(roots, ix.Dependents(id)...)
	}
	return false, hit
}

var lineField = regexp.MustCompile(`"Line":\d+`)

// baseCaseKey is a comparable form of a base case, without line numbers.
func baseCaseKey(b *state.BaseCase) string {
	data, _ := json.Marshal(b)
	return lineField.ReplaceAllString(string(data), "")
}

// SameIgnoringLines reports whether a and b are the same as JSON, line
// numbers aside (a hand edit that moved a part did not change it).
func SameIgnoringLines(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return lineField.ReplaceAllString(string(x), "") == lineField.ReplaceAllString(string(y), "")
}
