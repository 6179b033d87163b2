package dag

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/state"
)

func atomField(id string) string { return fmt.Sprintf("atoms[%s]", id) }

// reaches reports whether target can be reached from the atoms in start by
// following depends_on edges (iteratively: any depth, no recursion).
func (g *graph) reaches(start []string, target string) bool {
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
		}
	}
	return false
}

// checkNewAtom checks an atom about to be added: a new non-blank id, known
// dependencies, no cycle through atoms that already name the new id.
func (g *graph) checkNewAtom(a state.Atom, taken map[string]bool) error {
	f := atomField(a.ID)
	switch {
	case strings.TrimSpace(a.ID) == "":
		return errorf(ErrInvalid, "atoms", "an atom id must not be blank")
	case strings.TrimSpace(a.ID) != a.ID || strings.ContainsAny(a.ID, "\r\n"):
		return errorf(ErrInvalid, f, "the id %q has surrounding spaces or a line break", a.ID)
	case g.atom(a.ID) != nil || taken[a.ID]:
		return errorf(ErrDuplicate, f, "atom id %q already exists", a.ID)
	case strings.TrimSpace(a.Description) == "":
		return errorf(ErrInvalid, f+".description", "the description must not be blank")
	}
	seen := map[string]bool{}
	for _, d := range a.DependsOn {
		switch {
		case d == a.ID:
			return errorf(ErrCycle, f+".depends_on", "%s cannot depend on itself", a.ID)
		case g.atom(d) == nil && !taken[d]:
			return errorf(ErrUnknownAtom, f+".depends_on", "dependency %q is not an atom", d)
		case seen[d]:
			return errorf(ErrDuplicate, f+".depends_on", "dependency %q is listed twice", d)
		}
		seen[d] = true
	}
	if g.reaches(a.DependsOn, a.ID) {
		return errorf(ErrCycle, f+".depends_on", "adding %s would close a dependency cycle through atoms that already name it", a.ID)
	}
	return nil
}

// AddAtom adds a pending atom. Its id must be new, its dependencies must
// exist, and it must not close a cycle. With an OR group the atom joins that
// group as another choice; a group that does not exist yet is created with
// the atom selected.
func AddAtom(s *state.State, a state.Atom) error {
	g := newGraph(s)
	if err := g.checkNewAtom(a, nil); err != nil {
		return err
	}
	a.Status = state.StatusPending
	a.DependsOn = append([]string{}, a.DependsOn...)
	a.Line = 0
	s.Atoms = append(s.Atoms, a)
	if a.ORGroup != "" {
		if grp := g.group[a.ORGroup]; grp != nil {
			if !slices.Contains(grp.Choices, a.ID) {
				grp.Choices = append(grp.Choices, a.ID)
			}
		} else {
			s.ORGroups = append(s.ORGroups, state.ORGroup{Name: a.ORGroup, Choices: []string{a.ID}, Selected: a.ID, Failed: []string{}})
		}
	}
	return nil
}

// Decompose splits parent into children. The parent stays pending (it is not
// executable until its children are resolved); each child is pending and
// inherits the parent's dependencies before its own. It returns the inherited
// dependencies.
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
	taken := map[string]bool{}
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
		if err := g.checkNewAtom(c, taken); err != nil {
			return nil, err
		}
		taken[c.ID] = true
		c.Status = state.StatusPending
		c.ORGroup = ""
		c.Line = 0
		out = append(out, c)
		ids = append(ids, c.ID)
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
				part += ": " + shorten(sum, 120)
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

func shorten(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// SetStatus changes an atom's status: pending -> in_progress -> resolved, and
// any status back to pending. pending -> resolved is refused (only a
// decomposed parent gets it, through ResolveParents).
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
	a.Status = status
	return nil
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
