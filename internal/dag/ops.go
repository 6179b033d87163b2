package dag

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/state"
)

func atomField(id string) string { return fmt.Sprintf("atoms[%s]", id) }

// reaches reports whether target can be reached from the atoms in start by
// following depends_on edges (iteratively: any depth, no recursion). Atoms
// about to be added together (batch: id -> depends_on) count as atoms.
func (g *graph) reaches(start []string, target string, batch map[string][]string) bool {
	seen := map[string]bool{}
	stack := append([]string(nil), start...)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id == target {
			return true
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if a := g.atom(id); a != nil {
			stack = append(stack, a.DependsOn...)
		} else if deps, ok := batch[id]; ok {
			stack = append(stack, deps...)
		}
	}
	return false
}

// checkNewAtom checks an atom about to be added: a new non-blank id,
// dependencies that are atoms or atoms of the same batch (in any
// order), no cycle through atoms that already name the new id or through the
// batch. refused names batch atoms that were refused, for a clearer message.
func (g *graph) checkNewAtom(a state.Atom, batch map[string][]string, refused map[string]bool) error {
	f := atomField(a.ID)
	switch {
	case strings.TrimSpace(a.ID) == "":
		return errorf(ErrInvalid, "atoms", "an atom id must not be blank")
	case strings.TrimSpace(a.ID) != a.ID || strings.ContainsAny(a.ID, "\r\n"):
		return errorf(ErrInvalid, f, "the id %q has surrounding spaces or a line break", a.ID)
	case state.ValidID(a.ID) != nil:
		return errorf(ErrInvalid, f, "%v", state.ValidID(a.ID))
	case g.atom(a.ID) != nil:
		return errorf(ErrDuplicate, f, "atom id %q already exists", a.ID)
	case strings.TrimSpace(a.Description) == "":
		return errorf(ErrInvalid, f+".description", "the description must not be blank")
	}
	seen := map[string]bool{}
	for _, d := range a.DependsOn {
		_, inBatch := batch[d]
		switch {
		case d == a.ID:
			return errorf(ErrCycle, f+".depends_on", "%s cannot depend on itself", a.ID)
		case refused[d]:
			return errorf(ErrUnknownAtom, f+".depends_on", "dependency %q is not an atom: it was refused too", d)
		case g.atom(d) == nil && !inBatch:
			return errorf(ErrUnknownAtom, f+".depends_on", "dependency %q is not an atom", d)
		case seen[d]:
			return errorf(ErrDuplicate, f+".depends_on", "dependency %q is listed twice", d)
		}
		seen[d] = true
	}
	if g.reaches(a.DependsOn, a.ID, batch) {
		if len(batch) > 1 {
			return errorf(ErrCycle, f+".depends_on", "adding %s would close a dependency cycle (through the atoms added with it or atoms that already name it)", a.ID)
		}
		return errorf(ErrCycle, f+".depends_on", "adding %s would close a dependency cycle through atoms that already name it", a.ID)
	}
	return nil
}

// checkBatch checks atoms that are added together. Each may depend on any
// other of the batch, listed before or after it; a cycle within the batch or
// through existing atoms is refused, and so is an atom that depends on a
// refused one. It returns one error per atom, nil for those that may be added.
func (g *graph) checkBatch(batch []state.Atom) []error {
	errs := make([]error, len(batch))
	first := map[string]bool{}
	for i, a := range batch {
		if first[a.ID] {
			errs[i] = errorf(ErrDuplicate, atomField(a.ID), "atom id %q is proposed twice", a.ID)
		}
		first[a.ID] = true
	}
	for {
		pending := map[string][]string{}
		refused := map[string]bool{}
		for i, a := range batch {
			if errs[i] == nil {
				pending[a.ID] = a.DependsOn
			} else if g.atom(a.ID) == nil {
				refused[a.ID] = true
			}
		}
		// A refused id that a valid atom of the batch also uses is not refused.
		for id := range pending {
			delete(refused, id)
		}
		changed := false
		for i, a := range batch {
			if errs[i] != nil {
				continue
			}
			if err := g.checkNewAtom(a, pending, refused); err != nil {
				errs[i] = err
				changed = true
			}
		}
		if !changed {
			return errs
		}
	}
}

// AddAtom adds a pending atom. Its id must be new, its dependencies must
// exist, and it must not close a cycle. With an OR group the atom joins that
// group as another choice; a group that does not exist yet is created with
// the atom selected.
func AddAtom(s *state.State, a state.Atom) error {
	return AddAtoms(s, []state.Atom{a})[0]
}

// AddAtoms adds atoms proposed together (a planner's batch): each may depend
// on any other of the batch, whatever their order. Every atom is checked as
// AddAtom checks one; an invalid atom, or one that depends on an invalid one,
// is left out with its error, the others are added in the order given. A
// cycle among the batch refuses the atoms on it. It returns one error per
// atom, nil for those added.
func AddAtoms(s *state.State, atoms []state.Atom) []error {
	g := newGraph(s)
	errs := g.checkBatch(atoms)
	for i, a := range atoms {
		if errs[i] != nil {
			continue
		}
		a.Status = state.StatusPending
		a.DependsOn = append([]string{}, a.DependsOn...)
		a.Line = 0
		s.Atoms = append(s.Atoms, a)
		if a.ORGroup != "" {
			if grp := s.ORGroup(a.ORGroup); grp != nil {
				if !slices.Contains(grp.Choices, a.ID) {
					grp.Choices = append(grp.Choices, a.ID)
				}
			} else {
				s.ORGroups = append(s.ORGroups, state.ORGroup{Name: a.ORGroup, Choices: []string{a.ID}, Selected: a.ID, Failed: []string{}})
			}
		}
	}
	return errs
}

// Decompose splits parent into children. The parent stays pending (it is not
// executable until its children are resolved); each child is pending and
// inherits the parent's dependencies before its own. Children may depend on
// each other in any order (a cycle among them is refused). It returns the
// inherited dependencies.
func Decompose(s *state.State, parent string, children []state.Atom, reason string) ([]string, error) {
	g := newGraph(s)
	p := g.atom(parent)
	switch {
	case p == nil:
		return nil, errorf(ErrUnknownAtom, atomField(parent), "parent atom %q does not exist", parent)
	case p.Status == state.StatusResolved:
		return nil, errorf(ErrTransition, atomField(parent), "%s is already resolved; there is nothing left to split", parent)
	case len(children) == 0:
		return nil, errorf(ErrInvalid, "decompositions", "a decomposition needs at least one child")
	case strings.TrimSpace(reason) == "":
		return nil, errorf(ErrInvalid, "decompositions", "a decomposition needs a reason")
	}
	inherited := append([]string{}, p.DependsOn...)
	out := make([]state.Atom, 0, len(children))
	ids := make([]string, 0, len(children))
	for _, c := range children {
		deps := append([]string{}, inherited...)
		for _, d := range c.DependsOn {
			if !slices.Contains(deps, d) {
				deps = append(deps, d)
			}
		}
		c.DependsOn = deps
		if slices.Contains(c.DependsOn, parent) {
			return nil, errorf(ErrCycle, atomField(c.ID)+".depends_on", "a child cannot depend on its parent %s", parent)
		}
		c.Status = state.StatusPending
		c.ORGroup = ""
		c.Line = 0
		out = append(out, c)
		ids = append(ids, c.ID)
	}
	for _, err := range g.checkBatch(out) {
		if err != nil {
			return nil, err
		}
	}
	if p.Status == state.StatusInProgress {
		p.Status = state.StatusPending
	}
	s.Atoms = append(s.Atoms, out...)
	s.Decompositions = append(s.Decompositions, state.Decomposition{Parent: parent, Children: ids, Reason: reason})
	return inherited, nil
}

// ResolveParents resolves every decomposed parent whose children are all
// resolved (pending -> resolved, the one transition only the system makes),
// with a binding that names the children and carries their artifacts. It
// repeats until nothing changes, so nested decompositions resolve bottom-up,
// and returns the parents it resolved.
func ResolveParents(s *state.State) []string {
	if len(s.Decompositions) == 0 {
		return nil
	}
	var done []string
	for {
		g := newGraph(s)
		changed := false
		for _, d := range s.Decompositions {
			p := g.atom(d.Parent)
			if p == nil || p.Status == state.StatusResolved || g.openParent(d.Parent) {
				continue
			}
			kids := g.children[d.Parent]
			if len(kids) == 0 {
				continue
			}
			p.Status = state.StatusResolved
			s.SetBinding(parentBinding(s, d.Parent, kids))
			done = append(done, d.Parent)
			changed = true
		}
		if !changed {
			return done
		}
	}
}

func parentBinding(s *state.State, parent string, kids []string) state.Binding {
	var parts []string
	artifacts := []string{}
	seen := map[string]bool{}
	for _, k := range kids {
		part := k
		if b := s.Binding(k); b != nil {
			if sum := strings.TrimSpace(b.Summary); sum != "" {
				part += ": " + OneLine(sum, 120)
			}
			for _, a := range b.Artifacts {
				if !seen[a] {
					seen[a] = true
					artifacts = append(artifacts, a)
				}
			}
		}
		parts = append(parts, part)
	}
	return state.Binding{
		AtomID:    parent,
		Summary:   "Resolved through its children: " + strings.Join(parts, "; "),
		Artifacts: artifacts,
	}
}

// OneLine puts s on one line (runs of white space become one space) and
// cuts it to max runes with an ellipsis: the short form of a description,
// reason or evidence for lines people read.
func OneLine(s string, max int) string {
	return brief.Line(s, max)
}

// SetStatus changes an atom's status: pending -> in_progress -> resolved, and
// any status back to pending. pending -> resolved is refused (only a
// decomposed parent gets it, through ResolveParents), and so is in_progress
// or resolved while a dependency is not satisfied: work waits for what it
// needs.
func SetStatus(s *state.State, id, status string) error {
	f := atomField(id) + ".status"
	switch status {
	case state.StatusPending, state.StatusInProgress, state.StatusResolved:
	default:
		return errorf(ErrInvalid, f, "unknown status %q (want pending, in_progress or resolved)", status)
	}
	a := s.Atom(id)
	if a == nil {
		return errorf(ErrUnknownAtom, atomField(id), "atom %q does not exist", id)
	}
	from := a.Status
	legal := from == status || status == state.StatusPending ||
		from == state.StatusPending && status == state.StatusInProgress ||
		from == state.StatusInProgress && status == state.StatusResolved
	if !legal {
		msg := fmt.Sprintf("illegal transition %s -> %s", from, status)
		if from == state.StatusPending && status == state.StatusResolved {
			msg += " (set it in_progress first: an atom is resolved by finishing work on it)"
		}
		return errorf(ErrTransition, f, "%s", msg)
	}
	if status != state.StatusPending && status != from {
		g := newGraph(s)
		for _, d := range a.DependsOn {
			if !g.satisfied(d) {
				return errorf(ErrTransition, f, "%s cannot be %s yet: %s", id, status, g.unmet(d))
			}
		}
	}
	a.Status = status
	return nil
}

// unmet says why a dependency on id is not satisfied, for a person.
func (g *graph) unmet(id string) string {
	a := g.atom(id)
	if a == nil {
		return fmt.Sprintf("its dependency %s is not an atom", id)
	}
	if grp := g.orGroupOf(a); grp != nil && grp.Selected != "" {
		sel := g.atom(grp.Selected)
		st := "missing"
		if sel != nil {
			st = sel.Status
		}
		if grp.Selected == id {
			return fmt.Sprintf("its dependency %s (the selected choice of OR group %s) is %s; resolve it first", id, grp.Name, st)
		}
		return fmt.Sprintf("its dependency %s is a choice of OR group %s, whose selected choice %s is %s; resolve %s first", id, grp.Name, grp.Selected, st, grp.Selected)
	}
	return fmt.Sprintf("its dependency %s is %s; resolve %s first", id, a.Status, id)
}

// Bind adds or replaces the binding of an existing atom.
func Bind(s *state.State, id, summary string, artifacts []string) error {
	if s.Atom(id) == nil {
		return errorf(ErrUnknownAtom, fmt.Sprintf("bindings[%s]", id), "atom %q does not exist", id)
	}
	if strings.TrimSpace(summary) == "" {
		return errorf(ErrInvalid, fmt.Sprintf("bindings[%s].summary", id), "the summary must not be blank")
	}
	arts := make([]string, 0, len(artifacts))
	for _, a := range artifacts {
		if strings.TrimSpace(a) == "" {
			return errorf(ErrInvalid, fmt.Sprintf("bindings[%s].artifacts", id), "an artifact path must not be blank")
		}
		arts = append(arts, a)
	}
	s.SetBinding(state.Binding{AtomID: id, Summary: summary, Artifacts: arts})
	return nil
}

func timestamp(now time.Time) string { return now.Format(time.RFC3339) }

// SwitchOR selects choice in group and records the switch in the trail. A
// choice that had failed may be selected again by a person; it leaves the
// failed list. The newly selected atom stays as it is when resolved and
// otherwise waits, pending, for an agent.
func SwitchOR(s *state.State, group, choice, reason string, now time.Time) error {
	grp := s.ORGroup(group)
	f := "or_groups." + group
	switch {
	case grp == nil:
		return errorf(ErrUnknownAtom, f, "OR group %q does not exist", group)
	case !slices.Contains(grp.Choices, choice):
		return errorf(ErrUnknownAtom, f+".choices", "%q is not a choice of OR group %s (choices: %s)", choice, group, strings.Join(grp.Choices, ", "))
	case s.Atom(choice) == nil:
		return errorf(ErrUnknownAtom, f+".choices", "choice %q is not an atom", choice)
	case strings.TrimSpace(reason) == "":
		return errorf(ErrInvalid, "trail", "a switch needs a reason")
	}
	grp.Selected = choice
	grp.Failed = slices.DeleteFunc(grp.Failed, func(x string) bool { return x == choice })
	if a := s.Atom(choice); a.Status == state.StatusInProgress {
		a.Status = state.StatusPending
	}
	s.Trail = append(s.Trail, state.TrailEntry{ORGroup: group, Selected: choice, Reason: reason, Timestamp: timestamp(now)})
	return nil
}

// FailResult is the outcome of FailOR.
type FailResult struct {
	Group     string
	Failed    string
	Selected  string // the new selection; the failed one when exhausted
	Exhausted bool
}

// ExhaustedReason is the stop reason of a group whose choices all failed.
func ExhaustedReason(group string) string { return "OR group exhausted: " + group }

// FailOR records that atom, a choice of an OR group, failed: it joins the
// failed list, loses its binding and returns to pending. When it was the
// selected choice, the next choice in order that has not failed is selected,
// with a trail entry. When every choice has failed the group is exhausted:
// control is stopped with ExhaustedReason.
func FailOR(s *state.State, atom, reason string, now time.Time) (FailResult, error) {
	a := s.Atom(atom)
	if a == nil {
		return FailResult{}, errorf(ErrUnknownAtom, atomField(atom), "atom %q does not exist", atom)
	}
	if a.ORGroup == "" || s.ORGroup(a.ORGroup) == nil {
		return FailResult{}, errorf(ErrInvalid, atomField(atom)+".or_group", "%s is not a choice of an OR group", atom)
	}
	grp := s.ORGroup(a.ORGroup)
	res := FailResult{Group: grp.Name, Failed: atom}
	if !slices.Contains(grp.Failed, atom) {
		grp.Failed = append(grp.Failed, atom)
	}
	s.DeleteBinding(atom)
	a.Status = state.StatusPending
	if grp.Selected != atom && grp.Selected != "" && !slices.Contains(grp.Failed, grp.Selected) {
		res.Selected = grp.Selected
		return res, nil
	}
	for _, c := range grp.Choices {
		if !slices.Contains(grp.Failed, c) && s.Atom(c) != nil {
			grp.Selected = c
			res.Selected = c
			why := fmt.Sprintf("%s failed", atom)
			if r := strings.TrimSpace(reason); r != "" && r != why {
				why += ": " + r
			}
			s.Trail = append(s.Trail, state.TrailEntry{ORGroup: grp.Name, Selected: c, Reason: why, Timestamp: timestamp(now)})
			return res, nil
		}
	}
	res.Selected = grp.Selected
	res.Exhausted = true
	switch s.Control.Status {
	case state.ControlPending, state.ControlRunning:
		s.Control.Status = state.ControlStopped
	}
	r := ExhaustedReason(grp.Name)
	s.Control.StopReason = &r
	return res, nil
}
