// Package dag holds the work-graph operations as pure functions over a
// state: which atoms may run, how far the graph is from done, and the
// changes the loop makes (add, decompose, resolve parents, bind, switch and
// fail OR choices). A failed operation leaves the state unchanged.
package dag

import (
	"errors"
	"fmt"
	"slices"

	"github.com/aot-loop/aot/internal/state"
)

// Kinds of errors, for errors.Is.
var (
	ErrUnknownAtom = errors.New("unknown atom")
	ErrDuplicate   = errors.New("duplicate id")
	ErrCycle       = errors.New("dependency cycle")
	ErrTransition  = errors.New("illegal transition")
	ErrInvalid     = errors.New("invalid request")
)

// Error is an operation refused because of one field of the request.
type Error struct {
	Field string // e.g. atoms[A3].status, or_groups.build
	Msg   string
	Kind  error
}

func (e *Error) Error() string { return e.Field + ": " + e.Msg }

// Is matches the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

func errorf(kind error, field, format string, args ...any) error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...), Kind: kind}
}

// graph is an index of a state, built once per operation.
type graph struct {
	s        *state.State
	index    map[string]int            // atom id -> index in s.Atoms
	group    map[string]*state.ORGroup // group name -> group
	children map[string][]string       // open or closed decompositions: parent -> children
}

func newGraph(s *state.State) *graph {
	g := &graph{s: s, index: s.AtomIndex(), group: make(map[string]*state.ORGroup, len(s.ORGroups))}
	for i := range s.ORGroups {
		g.group[s.ORGroups[i].Name] = &s.ORGroups[i]
	}
	if len(s.Decompositions) > 0 {
		g.children = make(map[string][]string, len(s.Decompositions))
		for _, d := range s.Decompositions {
			g.children[d.Parent] = append(g.children[d.Parent], d.Children...)
		}
	}
	return g
}

func (g *graph) atom(id string) *state.Atom {
	if i, ok := g.index[id]; ok {
		return &g.s.Atoms[i]
	}
	return nil
}

func (g *graph) resolved(id string) bool {
	a := g.atom(id)
	return a != nil && a.Status == state.StatusResolved
}

// orGroupOf returns the OR group an atom is a choice of, or nil. The atom's
// or_group field is authoritative; a group that lists it as a choice counts too.
func (g *graph) orGroupOf(a *state.Atom) *state.ORGroup {
	if a.ORGroup != "" {
		return g.group[a.ORGroup]
	}
	return nil
}

// satisfied reports whether a dependency on id is met: the atom is
// resolved, or it is a member of an OR group whose selected choice is.
func (g *graph) satisfied(id string) bool {
	a := g.atom(id)
	if a == nil {
		return false
	}
	if grp := g.orGroupOf(a); grp != nil && grp.Selected != "" {
		return g.resolved(grp.Selected)
	}
	return a.Status == state.StatusResolved
}

// openParent reports whether a is a decomposed parent with an unresolved child.
func (g *graph) openParent(id string) bool {
	for _, c := range g.children[id] {
		if !g.resolved(c) {
			return true
		}
	}
	return false
}

// live reports whether an atom counts for progress: an OR choice counts only
// when it is its group's selected choice, a decomposed parent only once its
// children are all resolved.
func (g *graph) live(a *state.Atom) bool {
	if grp := g.orGroupOf(a); grp != nil && grp.Selected != a.ID {
		return false
	}
	return !g.openParent(a.ID)
}

// Executable returns the atoms that may start now, in file order: pending,
// every dependency satisfied, the selected choice of its OR group if it is
// in one, and not a decomposed parent with an unresolved child. limit <= 0
// means no cap; otherwise at most limit minus the atoms already in progress.
func Executable(s *state.State, limit int) []*state.Atom {
	g := newGraph(s)
	room := -1
	if limit > 0 {
		running := 0
		for i := range s.Atoms {
			if s.Atoms[i].Status == state.StatusInProgress {
				running++
			}
		}
		room = limit - running
		if room <= 0 {
			return nil
		}
	}
	var out []*state.Atom
	for i := range s.Atoms {
		a := &s.Atoms[i]
		if a.Status != state.StatusPending || !g.ready(a) {
			continue
		}
		out = append(out, a)
		if room > 0 && len(out) == room {
			break
		}
	}
	return out
}

// ready reports whether a pending atom may start: the rules of Executable
// other than its status.
func (g *graph) ready(a *state.Atom) bool {
	if grp := g.orGroupOf(a); grp != nil && (grp.Selected != a.ID || slices.Contains(grp.Failed, a.ID)) {
		return false
	}
	if g.openParent(a.ID) {
		return false
	}
	for _, d := range a.DependsOn {
		if !g.satisfied(d) {
			return false
		}
	}
	return true
}

// ReadyChoices returns the choices of a speculative OR group that may run at
// the same time: pending, not failed, dependencies satisfied, not an open
// parent, in the group's choice order.
func ReadyChoices(s *state.State, group string) []*state.Atom {
	g := newGraph(s)
	grp := g.group[group]
	if grp == nil {
		return nil
	}
	failed := make(map[string]bool, len(grp.Failed))
	for _, f := range grp.Failed {
		failed[f] = true
	}
	var out []*state.Atom
	for _, c := range grp.Choices {
		a := g.atom(c)
		if a == nil || failed[c] || a.Status != state.StatusPending || g.openParent(c) {
			continue
		}
		ok := true
		for _, d := range a.DependsOn {
			if !g.satisfied(d) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, a)
		}
	}
	return out
}

// Unresolved counts the atoms between the graph and done: atoms not resolved,
// where an OR group counts once (through its selected choice) and a decomposed
// parent is replaced by its children until they are all resolved.
func Unresolved(s *state.State) int {
	g := newGraph(s)
	n := 0
	for i := range s.Atoms {
		a := &s.Atoms[i]
		if a.Status != state.StatusResolved && g.live(a) {
			n++
		}
	}
	return n
}

// Wait says why a pending atom cannot start.
type Wait struct {
	Atom    string
	WaitsOn []string // unsatisfied dependencies, or the unresolved children of a decomposed parent
}

// Deadlock returns why nothing can run when live atoms are pending, none is
// executable and none is in progress; nil otherwise.
func Deadlock(s *state.State) []Wait {
	g := newGraph(s)
	var pending []*state.Atom
	for i := range s.Atoms {
		a := &s.Atoms[i]
		switch {
		case a.Status == state.StatusInProgress:
			return nil
		case a.Status == state.StatusPending && g.live(a):
			if g.ready(a) {
				return nil
			}
			pending = append(pending, a)
		}
	}
	var out []Wait
	for _, a := range pending {
		w := Wait{Atom: a.ID}
		if grp := g.orGroupOf(a); grp != nil && slices.Contains(grp.Failed, a.ID) {
			w.WaitsOn = append(w.WaitsOn, "or_group "+grp.Name+" (this choice failed and no other is left)")
		}
		for _, d := range a.DependsOn {
			if !g.satisfied(d) {
				w.WaitsOn = append(w.WaitsOn, d)
			}
		}
		out = append(out, w)
	}
	return out
}
