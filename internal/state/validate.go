package state

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Report is the result of validating a state.
type Report struct {
	Errors   []Issue
	Warnings []Issue
}

// Valid reports whether the state has no errors.
func (r Report) Valid() bool { return len(r.Errors) == 0 }

var (
	atomStatuses    = []string{StatusPending, StatusInProgress, StatusResolved}
	controlStatuses = []string{ControlPending, ControlRunning, ControlStopped, ControlCompleted}
	checkTypes      = []string{CheckCommand, CheckNotCommand, CheckFile, CheckNotFile, CheckAssertion, CheckQuality}
)

func oneOf(v string, set []string) bool {
	for _, s := range set {
		if s == v {
			return true
		}
	}
	return false
}

type validator struct {
	r Report
}

func (v *validator) err(field string, line int, format string, args ...any) {
	v.r.Errors = append(v.r.Errors, Issue{Field: field, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) warn(field string, line int, format string, args ...any) {
	v.r.Warnings = append(v.r.Warnings, Issue{Field: field, Line: line, Message: fmt.Sprintf(format, args...)})
}

// Validate checks every invariant of the contract.
func Validate(s *State) Report {
	errs, warns := s.readIssues()
	return validate(s, errs, warns)
}

// validate is Validate of a state read with the given problems.
func validate(s *State, errs, warns []Issue) Report {
	v := &validator{}
	v.r.Errors = append(v.r.Errors, errs...)
	v.r.Warnings = append(v.r.Warnings, warns...)
	v.objective(&s.Objective)
	v.control(&s.Control)
	idx := v.atoms(s)
	v.order(s, idx)
	v.cycles(s, idx)
	v.orGroups(s, idx)
	v.decompositions(s, idx)
	v.bindings(s, idx)
	v.trail(s)
	v.corrections(s)
	return v.r
}

func (v *validator) objective(o *Objective) {
	c := o.Constraints
	for _, f := range []struct {
		name string
		val  int
	}{{"max_iterations", c.MaxIterations}, {"max_parallel_agents", c.MaxParallelAgents}, {"max_stall_count", c.MaxStallCount}} {
		if f.val < 1 {
			v.err("objective.constraints."+f.name, 0, "must be at least 1, got %d", f.val)
		}
	}
	if c.MaxWallTime != "" {
		if _, err := ParseDuration(c.MaxWallTime); err != nil {
			v.err("objective.constraints.max_wall_time", 0, "%v", err)
		}
	}
	if c.MaxCostUSD < 0 || c.MaxTokens < 0 || c.MaxAttemptsPerAtom < 0 {
		v.err("objective.constraints", 0, "limits must not be negative")
	}
	if o.BaseCase == nil {
		return
	}
	if o.BaseCase.Legacy != nil {
		v.check("objective.base_case", o.BaseCase.Legacy, true)
		return
	}
	if len(o.BaseCase.Checklist) == 0 {
		v.warn("objective.base_case.checklist", 0, "the checklist is empty: verification can never pass")
	}
	v.items("objective.base_case.checklist", o.BaseCase.Checklist)
}

func (v *validator) items(field string, items []ChecklistItem) {
	for i := range items {
		it := &items[i]
		f := field + "[" + strconv.Itoa(i) + "]"
		kinds := 0
		if it.Check != nil {
			kinds++
			v.check(f+".check", it.Check, false)
		}
		if it.HasGroup {
			kinds++
			if len(it.Group) == 0 {
				v.warn(f+".group", it.Line, "empty group: it can never pass")
			}
			v.items(f+".group", it.Group)
		}
		if it.HasAnyOf {
			kinds++
			if len(it.AnyOf) == 0 {
				v.warn(f+".any_of", it.Line, "empty any_of: it can never pass")
			}
			v.items(f+".any_of", it.AnyOf)
		}
		if kinds == 0 {
			v.err(f, it.Line, "item %q has no check, group or any_of", it.Item)
		} else if kinds > 1 {
			v.err(f, it.Line, "item %q must have exactly one of check, group or any_of", it.Item)
		}
	}
}

func (v *validator) check(field string, c *Check, legacy bool) {
	if !oneOf(c.Type, checkTypes) {
		v.err(field+".type", c.Line, "unknown check type %q (want one of %s)", c.Type, strings.Join(checkTypes, ", "))
		return
	}
	switch c.Type {
	case CheckQuality:
		if c.Criteria == "" && len(c.Rubric) == 0 {
			v.err(field, c.Line, "a quality check needs criteria or a rubric")
		}
		if c.PassThreshold == nil {
			v.warn(field+".pass_threshold", c.Line, "missing: the judge has no threshold")
		}
		for i, r := range c.Rubric {
			if r.Weight <= 0 {
				v.err(fmt.Sprintf("%s.rubric[%d].weight", field, i), c.Line, "must be positive")
			}
		}
	default:
		if strings.TrimSpace(c.Value) == "" {
			v.err(field+".value", c.Line, "a %s check needs a non-empty value", c.Type)
		}
	}
	if c.Timeout != "" {
		if _, err := ParseDuration(c.Timeout); err != nil {
			v.err(field+".timeout", c.Line, "%v", err)
		}
	}
}

func (v *validator) control(c *Control) {
	if !oneOf(c.Status, controlStatuses) {
		v.err("control.status", 0, "unknown status %q (want one of %s)", c.Status, strings.Join(controlStatuses, ", "))
	}
	if c.Iteration < 0 {
		v.err("control.iteration", 0, "must not be negative, got %d", c.Iteration)
	}
	if c.StallCount < 0 {
		v.err("control.stall_count", 0, "must not be negative, got %d", c.StallCount)
	}
	if c.PrevPendingCount < -1 {
		v.err("control.prev_pending_count", 0, "must be -1 (first iteration) or more, got %d", c.PrevPendingCount)
	}
	if c.LoopID != "" {
		if err := ValidID(c.LoopID); err != nil {
			v.err("control.loop_id", 0, "%s (it names the loop's git branches and folders)", strings.Replace(err.Error(), "atom id", "loop id", 1))
		}
	}
}

func (v *validator) atoms(s *State) map[string]int {
	if len(s.Atoms) == 0 {
		v.err("atoms", 0, "the work graph needs at least one atom")
	}
	idx := make(map[string]int, len(s.Atoms))
	for i := range s.Atoms {
		a := &s.Atoms[i]
		if a.ID == "" {
			v.err("atoms["+strconv.Itoa(i)+"].id", a.Line, "empty atom id")
			continue
		}
		if j, dup := idx[a.ID]; dup {
			v.err("atoms["+strconv.Itoa(i)+"].id", a.Line, "duplicate atom id %q (first at line %d)", a.ID, s.Atoms[j].Line)
			continue
		}
		if err := ValidID(a.ID); err != nil {
			v.warn("atoms["+strconv.Itoa(i)+"].id", a.Line, "%v (new atoms must follow it; this one still works)", err)
		}
		idx[a.ID] = i
	}
	running := s.Control.Status == ControlRunning
	groups := make(map[string]bool, len(s.ORGroups))
	for _, g := range s.ORGroups {
		groups[g.Name] = true
	}
	for i := range s.Atoms {
		a := &s.Atoms[i]
		// The field path is built only when there is something to report.
		f := func(key string) string { return "atoms[" + strconv.Itoa(i) + "]" + key }
		if !oneOf(a.Status, atomStatuses) {
			v.err(f(".status"), a.Line, "atom %q has unknown status %q (want pending, in_progress or resolved)", a.ID, a.Status)
		} else if a.Status == StatusInProgress && !running {
			v.warn(f(".status"), a.Line, "atom %q is in_progress while the loop is not running (an orphaned attempt)", a.ID)
		}
		for k, d := range a.DependsOn {
			switch {
			case d == a.ID:
				v.err(f(".depends_on"), a.Line, "atom %q depends on itself", a.ID)
			case slices.Contains(a.DependsOn[:k], d):
				v.warn(f(".depends_on"), a.Line, "atom %q lists dependency %q twice", a.ID, d)
			default:
				if _, ok := idx[d]; !ok {
					v.err(f(".depends_on"), a.Line, "atom %q depends on unknown atom %q", a.ID, d)
				}
			}
		}
		if strings.TrimSpace(a.Description) == "" {
			v.warn(f(".description"), a.Line, "atom %q has no description", a.ID)
		}
		if a.ORGroup != "" && !groups[a.ORGroup] {
			v.err(f(".or_group"), a.Line, "atom %q names OR group %q, which is not defined in or_groups", a.ID, a.ORGroup)
		}
		if a.Attempts < 0 {
			v.err(f(".attempts"), a.Line, "must not be negative")
		}
	}
	return idx
}

// order warns about an atom in progress or resolved while one of its
// dependencies is not satisfied (resolved, or a choice of an OR group whose
// selected choice is resolved): work started before what it needs was done,
// by a hand edit or a dependency that was reset since.
func (v *validator) order(s *State, idx map[string]int) {
	var selected map[string]string
	satisfied := func(id string) bool {
		j, ok := idx[id]
		if !ok {
			return true // an unknown atom is an error of its own
		}
		d := &s.Atoms[j]
		if d.ORGroup != "" {
			if selected == nil {
				selected = make(map[string]string, len(s.ORGroups))
				for _, g := range s.ORGroups {
					selected[g.Name] = g.Selected
				}
			}
			if sel := selected[d.ORGroup]; sel != "" {
				k, ok := idx[sel]
				return ok && s.Atoms[k].Status == StatusResolved
			}
		}
		return d.Status == StatusResolved
	}
	for i := range s.Atoms {
		a := &s.Atoms[i]
		if a.Status != StatusInProgress && a.Status != StatusResolved {
			continue
		}
		for _, d := range a.DependsOn {
			if d != a.ID && !satisfied(d) {
				v.warn("atoms["+strconv.Itoa(i)+"].status", a.Line, "atom %q is %s while its dependency %q is not resolved", a.ID, a.Status, d)
			}
		}
	}
}

// cycles reports every strongly connected component of the dependency graph
// that holds a cycle, with one cycle's path. Iterative: a 100,000-atom chain
// must not overflow the stack.
func (v *validator) cycles(s *State, idx map[string]int) {
	n := len(s.Atoms)
	// All edges in one array, each atom's a window of it: one allocation
	// instead of one per atom.
	total := 0
	for i := range s.Atoms {
		total += len(s.Atoms[i].DependsOn)
	}
	edges := make([]int32, 0, total)
	adj := make([][]int32, n)
	for i := range s.Atoms {
		from := len(edges)
		for _, d := range s.Atoms[i].DependsOn {
			if j, ok := idx[d]; ok && s.Atoms[i].ID != d {
				edges = append(edges, int32(j))
			}
		}
		adj[i] = edges[from:len(edges):len(edges)]
	}
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	type frame struct{ v, edge int32 }
	var call []frame
	var comp []int32
	var counter int32
	for start := 0; start < n; start++ {
		if index[start] >= 0 {
			continue
		}
		call = append(call[:0], frame{int32(start), 0})
		index[start], low[start] = counter, counter
		counter++
		stack = append(stack, int32(start))
		onStack[start] = true
		for len(call) > 0 {
			top := &call[len(call)-1]
			u := top.v
			if int(top.edge) < len(adj[u]) {
				w := adj[u][top.edge]
				top.edge++
				if index[w] < 0 {
					index[w], low[w] = counter, counter
					counter++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] && index[w] < low[u] {
					low[u] = index[w]
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].v
				if low[u] < low[p] {
					low[p] = low[u]
				}
			}
			if low[u] != index[u] {
				continue
			}
			comp = comp[:0]
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == u {
					break
				}
			}
			if len(comp) > 1 {
				v.reportCycle(s, adj, append([]int32(nil), comp...))
			}
		}
	}
}

// reportCycle finds one cycle inside a strongly connected component.
func (v *validator) reportCycle(s *State, adj [][]int32, comp []int32) {
	in := make(map[int32]bool, len(comp))
	first := comp[0]
	for _, c := range comp {
		in[c] = true
		if c < first {
			first = c
		}
	}
	// Walk from first staying inside the component until a node repeats.
	pos := map[int32]int{}
	var path []int32
	u := first
	for {
		if p, seen := pos[u]; seen {
			path = path[p:]
			break
		}
		pos[u] = len(path)
		path = append(path, u)
		for _, w := range adj[u] {
			if in[w] {
				u = w
				break
			}
		}
	}
	ids := make([]string, 0, len(path)+1)
	for _, p := range path {
		ids = append(ids, s.Atoms[p].ID)
	}
	ids = append(ids, s.Atoms[path[0]].ID)
	a := &s.Atoms[path[0]]
	msg := "dependency cycle: " + strings.Join(ids, " -> ")
	if len(comp) > len(path) {
		msg += fmt.Sprintf(" (%d atoms are caught in this tangle)", len(comp))
	}
	v.err("atoms["+strconv.Itoa(int(path[0]))+"].depends_on", a.Line, "%s", msg)
}

func (v *validator) orGroups(s *State, idx map[string]int) {
	for _, g := range s.ORGroups {
		f := "or_groups." + g.Name
		if len(g.Choices) == 0 {
			v.err(f+".choices", g.Line, "OR group %q has no choices", g.Name)
		}
		for _, c := range g.Choices {
			i, ok := idx[c]
			if !ok {
				v.err(f+".choices", g.Line, "OR group %q names unknown atom %q", g.Name, c)
				continue
			}
			if s.Atoms[i].ORGroup != g.Name {
				v.warn(f+".choices", g.Line, "atom %q is a choice of OR group %q but its or_group is %q", c, g.Name, s.Atoms[i].ORGroup)
			}
		}
		if g.Selected != "" && !oneOf(g.Selected, g.Choices) {
			v.err(f+".selected", g.Line, "selected %q is not one of the group's choices", g.Selected)
		}
		if g.Selected == "" && len(g.Choices) > 0 {
			v.warn(f+".selected", g.Line, "OR group %q has no selected choice", g.Name)
		}
		for _, c := range g.Failed {
			if !oneOf(c, g.Choices) {
				v.err(f+".failed", g.Line, "failed %q is not one of the group's choices", c)
			}
		}
		if g.Selected != "" && oneOf(g.Selected, g.Failed) {
			v.warn(f+".selected", g.Line, "selected %q is also listed as failed", g.Selected)
		}
	}
	for i := range s.Atoms {
		a := &s.Atoms[i]
		if a.ORGroup == "" {
			continue
		}
		if g := s.ORGroup(a.ORGroup); g != nil && !oneOf(a.ID, g.Choices) {
			v.warn("atoms["+strconv.Itoa(i)+"].or_group", a.Line, "atom %q says it belongs to OR group %q, which does not list it", a.ID, a.ORGroup)
		}
	}
}

func (v *validator) decompositions(s *State, idx map[string]int) {
	for i, d := range s.Decompositions {
		f := "decompositions[" + strconv.Itoa(i) + "]"
		if _, ok := idx[d.Parent]; !ok {
			v.err(f+".parent", d.Line, "unknown parent atom %q", d.Parent)
		}
		if len(d.Children) == 0 {
			v.err(f+".children", d.Line, "a decomposition needs at least one child")
		}
		allResolved := true
		for _, c := range d.Children {
			j, ok := idx[c]
			if !ok {
				v.err(f+".children", d.Line, "unknown child atom %q", c)
				allResolved = false
				continue
			}
			if c == d.Parent {
				v.err(f+".children", d.Line, "atom %q is listed as its own child", c)
			}
			if s.Atoms[j].Status != StatusResolved {
				allResolved = false
			}
		}
		if p, ok := idx[d.Parent]; ok && s.Atoms[p].Status == StatusResolved && !allResolved {
			v.warn(f+".parent", d.Line, "parent %q is resolved while some of its children are not", d.Parent)
		}
	}
}

func (v *validator) bindings(s *State, idx map[string]int) {
	for _, b := range s.Bindings {
		i, ok := idx[b.AtomID]
		if !ok {
			v.err("bindings."+b.AtomID, b.Line, "binding for unknown atom %q", b.AtomID)
			continue
		}
		if s.Atoms[i].Status != StatusResolved {
			v.warn("bindings."+b.AtomID, b.Line, "atom %q has a binding but is %s", b.AtomID, s.Atoms[i].Status)
		}
	}
}

func (v *validator) trail(s *State) {
	for i, e := range s.Trail {
		f := "trail[" + strconv.Itoa(i) + "]"
		if e.ORGroup == "" || e.Selected == "" {
			v.err(f, 0, "a trail entry needs or_group and selected")
		}
		if e.Timestamp != "" {
			if _, err := time.Parse(time.RFC3339, e.Timestamp); err != nil {
				v.warn(f+".timestamp", 0, "%q is not an RFC 3339 timestamp with a zone", e.Timestamp)
			}
		}
	}
}

func (v *validator) corrections(s *State) {
	for i, c := range s.Corrections {
		if !oneOf(c.Type, CorrectionTypes) {
			v.err("corrections["+strconv.Itoa(i)+"].type", 0, "unknown correction type %q (want one of %s)", c.Type, strings.Join(CorrectionTypes, ", "))
		}
	}
}

// newIssues returns the issues of after that before did not have.
func newIssues(before, after []Issue) []Issue {
	count := map[string]int{}
	for _, i := range before {
		count[i.key()]++
	}
	var out []Issue
	for _, i := range after {
		if count[i.key()] > 0 {
			count[i.key()]--
			continue
		}
		out = append(out, i)
	}
	return out
}

// transitionIssues checks the status changes between the state as read and s.
func transitionIssues(old, s *State) []Issue {
	var out []Issue
	if old.Control.Status != s.Control.Status && !controlTransitionOK(old.Control.Status, s.Control.Status) {
		out = append(out, Issue{Field: "control.status", Message: fmt.Sprintf("illegal transition %s -> %s", old.Control.Status, s.Control.Status)})
	}
	// Atoms usually keep their places: compare position by position and
	// index by id only from the first atom that moved.
	same := 0
	for same < len(s.Atoms) && same < len(old.Atoms) && s.Atoms[same].ID == old.Atoms[same].ID {
		same++
	}
	var prev map[string]string
	if same < len(s.Atoms) {
		prev = make(map[string]string, len(old.Atoms)-same)
		for i := same; i < len(old.Atoms); i++ {
			prev[old.Atoms[i].ID] = old.Atoms[i].Status
		}
	}
	var parents map[string][]string
	for i := range s.Atoms {
		a := &s.Atoms[i]
		var was string
		var ok bool
		if i < same {
			was, ok = old.Atoms[i].Status, true
		} else {
			was, ok = prev[a.ID]
		}
		if !ok || was == a.Status || a.Status == StatusPending {
			continue
		}
		legal := was == StatusPending && a.Status == StatusInProgress || was == StatusInProgress && a.Status == StatusResolved
		if !legal && was == StatusPending && a.Status == StatusResolved {
			if parents == nil {
				parents = map[string][]string{}
				for _, d := range s.Decompositions {
					parents[d.Parent] = append(parents[d.Parent], d.Children...)
				}
			}
			if kids, isParent := parents[a.ID]; isParent {
				legal = true
				for _, k := range kids {
					if c := s.Atom(k); c == nil || c.Status != StatusResolved {
						legal = false
					}
				}
			}
		}
		if !legal {
			out = append(out, Issue{Field: "atoms." + a.ID + ".status", Line: a.Line, Message: fmt.Sprintf("illegal transition %s -> %s for atom %q (allowed: pending -> in_progress -> resolved, any -> pending)", was, a.Status, a.ID)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}

func controlTransitionOK(from, to string) bool {
	switch from {
	case ControlPending:
		return to == ControlRunning || to == ControlStopped
	case ControlRunning:
		return to == ControlStopped || to == ControlCompleted
	case ControlStopped:
		return to == ControlRunning || to == ControlCompleted
	case ControlCompleted:
		return to == ControlRunning
	}
	return true // from an invalid status anything valid is a repair
}

// ParseDuration reads a duration: a bare integer is seconds, anything else a
// Go duration ("90s", "2m").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("duration %q must not be negative", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q (use seconds or a Go duration like 90s, 2m)", s)
	}
	return d, nil
}
