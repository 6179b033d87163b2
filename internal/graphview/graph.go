// Package graphview turns a state's work graph into a picture: nodes with
// their status and role, edges, OR groups and the critical path, laid out in
// layers left to right (Build), and drawn as Mermaid, Graphviz DOT or a
// self-contained SVG (Mermaid, DOT, SVG). aot graph and the web dashboard
// draw from the same Graph, whose JSON keys are snake_case.
package graphview

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/state"
)

// Edge kinds.
const (
	// KindDepends is a depends_on: From must resolve before To starts.
	KindDepends = "depends"
	// KindDecomposes links a decomposed parent (From) to a child (To).
	KindDecomposes = "decomposes"
	// KindOR is a depends_on that names a choice of an OR group: whichever
	// choice the group resolves through satisfies it. From is the group's
	// selected choice (the named one when none is selected); Group names it.
	KindOR = "or"
)

// DefaultMaxNodes is how many atoms a graph shows at most unless told
// otherwise: a picture of more is not read, and Mermaid renderers refuse
// much larger ones.
const DefaultMaxNodes = 250

// labelRunes is the length of a node's label, ellipsis included.
const labelRunes = 30

// Options tune Build.
type Options struct {
	// MaxNodes caps the atoms shown: 0 means DefaultMaxNodes, a negative
	// number means no cap. Over the cap the unresolved atoms that matter
	// most are kept (see Build) and the rest are counted in Graph.Omitted.
	MaxNodes int
}

// Graph is a laid-out picture of a work graph. Coordinates are in pixels,
// the origin top left; a node's X, Y is its top-left corner.
type Graph struct {
	Nodes        []Node   `json:"nodes"`
	Edges        []Edge   `json:"edges"`
	Groups       []Group  `json:"groups"`
	CriticalPath []string `json:"critical_path"`
	// Omitted counts the atoms left out to keep the picture readable, and
	// Note says so in a sentence ("" when every atom is shown).
	Omitted int    `json:"omitted"`
	Note    string `json:"note,omitempty"`
	Width   int    `json:"width"`
	Height  int    `json:"height"`
}

// Node is one atom.
type Node struct {
	ID          string `json:"id"`
	Label       string `json:"label"`       // the description on one line, shortened
	Description string `json:"description"` // the whole description
	Status      string `json:"status"`      // pending, in_progress or resolved, as in the file
	Executable  bool   `json:"executable"`  // may start now (dag.Executable; a speculative group's ready choices)
	ORGroup     string `json:"or_group,omitempty"`
	Selected    bool   `json:"selected"` // the selected choice of its OR group
	Failed      bool   `json:"failed"`   // a failed OR choice (see Build)
	Parent      string `json:"parent,omitempty"`
	Critical    bool   `json:"critical"`
	Layer       int    `json:"layer"`
	X           int    `json:"x"`
	Y           int    `json:"y"`
	W           int    `json:"w"`
	H           int    `json:"h"`
}

// Faded reports whether the node is an OR choice the loop is not taking:
// neither selected nor failed.
func (n *Node) Faded() bool { return n.ORGroup != "" && !n.Selected && !n.Failed }

// Edge is one arrow between two shown nodes. Points is its route, from the
// edge of From to the edge of To, bending where it passes a layer.
type Edge struct {
	From     string  `json:"from"`
	To       string  `json:"to"`
	Kind     string  `json:"kind"`
	Group    string  `json:"group,omitempty"` // the OR group of a KindOR edge
	Critical bool    `json:"critical"`
	Points   []Point `json:"points"`
}

// Point is a position in pixels.
type Point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// Group is one OR group and the box around its shown choices (zero size
// when none is shown).
type Group struct {
	ID        string   `json:"id"`
	Choices   []string `json:"choices"`
	Selected  string   `json:"selected"`
	Failed    []string `json:"failed"`
	Exhausted bool     `json:"exhausted"` // every choice failed
	X         int      `json:"x"`
	Y         int      `json:"y"`
	W         int      `json:"w"`
	H         int      `json:"h"`
}

// Build makes the picture of s's work graph.
//
// Failed choices: a choice is failed when its group lists it in failed, or
// when the trail records a later selection in its group for the reason
// "<choice> failed" (what aot or fail writes; older files kept only the
// trail) and it is not selected again since.
//
// The critical path is the longest chain of unresolved atoms that still
// bounds completion: atoms not resolved, counting only the selected choice
// of an OR group (unselected and failed choices never block), linked by
// depends_on (a dependency on any choice of a group is one on its selected
// choice) and by decomposition (an open parent waits for its children and
// adds no work of its own). Every such atom weighs one; ties go to the
// chain that starts first in the file. It lists the atoms from the first to
// do to the last.
//
// Over Options.MaxNodes atoms, Build keeps, in this order: the critical path,
// atoms in progress, executable atoms, other unresolved atoms, resolved
// atoms that a kept unresolved atom depends on, other resolved atoms; each
// class in file order.
func Build(s *state.State, opts Options) *Graph {
	b := newBuilder(s)
	g := &Graph{Nodes: []Node{}, Edges: []Edge{}, Groups: []Group{}, CriticalPath: b.criticalPath()}
	onPath := make(map[string]bool, len(g.CriticalPath))
	for _, id := range g.CriticalPath {
		onPath[id] = true
	}
	shown := b.choose(opts, onPath)
	resolved := 0
	for i := range s.Atoms {
		if !shown[i] {
			g.Omitted++
			if s.Atoms[i].Status == state.StatusResolved {
				resolved++
			}
		}
	}
	if g.Omitted > 0 {
		g.Note = fmt.Sprintf("+%d more atoms not shown (%d resolved, %d not)", g.Omitted, resolved, g.Omitted-resolved)
	}
	pos := make(map[string]int, len(s.Atoms)) // shown atom id -> node index
	for i := range s.Atoms {
		a := &s.Atoms[i]
		if !shown[i] {
			continue
		}
		if _, dup := pos[a.ID]; dup {
			continue
		}
		pos[a.ID] = len(g.Nodes)
		n := Node{ID: a.ID, Label: Label(a.Description), Description: a.Description, Status: a.Status,
			Executable: b.executable[a.ID], ORGroup: a.ORGroup, Failed: b.failed[a.ID], Parent: b.parent[a.ID], Critical: onPath[a.ID]}
		if grp := b.group[a.ORGroup]; grp != nil {
			n.Selected = grp.Selected == a.ID
		}
		g.Nodes = append(g.Nodes, n)
	}
	g.Edges = b.edges(pos, onPath, g.CriticalPath)
	for _, grp := range s.ORGroups {
		gr := Group{ID: grp.Name, Choices: nonNil(grp.Choices), Selected: grp.Selected, Failed: []string{}, Exhausted: len(grp.Choices) > 0}
		for _, c := range grp.Choices {
			if b.failed[c] {
				gr.Failed = append(gr.Failed, c)
			} else {
				gr.Exhausted = false
			}
		}
		g.Groups = append(g.Groups, gr)
	}
	layout(g)
	return g
}

func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// builder holds the indexes Build needs, each made once.
type builder struct {
	s          *state.State
	index      map[string]int            // atom id -> index in s.Atoms
	group      map[string]*state.ORGroup // group name -> group
	parent     map[string]string         // decomposition child -> parent
	children   map[string][]string       // decomposition parent -> children
	failed     map[string]bool
	executable map[string]bool
}

func newBuilder(s *state.State) *builder {
	b := &builder{s: s, index: s.AtomIndex(), group: make(map[string]*state.ORGroup, len(s.ORGroups)),
		parent: map[string]string{}, children: map[string][]string{}, failed: map[string]bool{}, executable: map[string]bool{}}
	for i := range s.ORGroups {
		grp := &s.ORGroups[i]
		b.group[grp.Name] = grp
		for _, f := range grp.Failed {
			b.failed[f] = true
		}
	}
	// The trail, oldest first: "X failed" marks X failed until X is selected again.
	for _, t := range s.Trail {
		delete(b.failed, t.Selected)
		if x, _, ok := strings.Cut(t.Reason, " failed"); ok && x != t.Selected {
			if grp := b.group[t.ORGroup]; grp != nil && slices.Contains(grp.Choices, x) {
				b.failed[x] = true
			}
		}
	}
	for i := range s.ORGroups { // the failed list is authoritative over the trail
		for _, f := range s.ORGroups[i].Failed {
			b.failed[f] = true
		}
	}
	for _, d := range s.Decompositions {
		b.children[d.Parent] = append(b.children[d.Parent], d.Children...)
		for _, c := range d.Children {
			b.parent[c] = d.Parent
		}
	}
	for _, a := range dag.Executable(s, 0) {
		b.executable[a.ID] = true
	}
	for _, grp := range s.ORGroups {
		if grp.Speculative {
			for _, a := range dag.ReadyChoices(s, grp.Name) {
				b.executable[a.ID] = true
			}
		}
	}
	return b
}

func (b *builder) atom(id string) *state.Atom {
	if i, ok := b.index[id]; ok {
		return &b.s.Atoms[i]
	}
	return nil
}

// target is the atom a dependency on id waits for: the selected choice
// when id is a choice of a group that has one.
func (b *builder) target(id string) string {
	if a := b.atom(id); a != nil && a.ORGroup != "" {
		if grp := b.group[a.ORGroup]; grp != nil && grp.Selected != "" && b.atom(grp.Selected) != nil {
			return grp.Selected
		}
	}
	return id
}

// open reports whether an atom still bounds completion: not resolved, and
// the selected choice of its group if it is in one.
func (b *builder) open(a *state.Atom) bool {
	if a.Status == state.StatusResolved {
		return false
	}
	if grp := b.group[a.ORGroup]; grp != nil && (grp.Selected != a.ID || b.failed[a.ID]) {
		return false
	}
	return true
}

// criticalPath is the longest chain of open atoms (see Build), by dynamic
// programming in topological order. Atoms on a cycle (an invalid file) are
// left out.
func (b *builder) criticalPath() []string {
	atoms := b.s.Atoms
	n := len(atoms)
	// pred[i]: the open atoms that must resolve before atom i can.
	pred := make([][]int32, n)
	succ := make([][]int32, n)
	indeg := make([]int32, n)
	openAt := make([]bool, n)
	for i := range atoms {
		openAt[i] = b.index[atoms[i].ID] == i && b.open(&atoms[i])
	}
	link := func(from, to int) {
		pred[to] = append(pred[to], int32(from))
		succ[from] = append(succ[from], int32(to))
		indeg[to]++
	}
	for i := range atoms {
		if !openAt[i] {
			continue
		}
		for _, d := range atoms[i].DependsOn {
			if j, ok := b.index[b.target(d)]; ok && openAt[j] && j != i {
				link(j, i)
			}
		}
		for _, c := range b.children[atoms[i].ID] {
			if j, ok := b.index[b.target(c)]; ok && openAt[j] && j != i {
				link(j, i)
			}
		}
	}
	weight := func(i int) int32 {
		if len(b.children[atoms[i].ID]) > 0 {
			return 0 // an open parent's work is its children's
		}
		return 1
	}
	length := make([]int32, n) // longest chain ending at i, i included
	from := make([]int32, n)   // the previous atom of that chain, -1 at its start
	first := make([]int32, n)  // the first atom of that chain
	queue := make([]int32, 0, n)
	for i := range atoms {
		from[i], first[i] = -1, int32(i)
		if openAt[i] && indeg[i] == 0 {
			queue = append(queue, int32(i))
		}
	}
	best := int32(-1)
	for k := 0; k < len(queue); k++ {
		i := queue[k]
		length[i] += weight(int(i))
		if best < 0 || length[i] > length[best] || length[i] == length[best] && first[i] < first[best] {
			best = i
		}
		for _, j := range succ[i] {
			if from[j] < 0 || length[i] > length[j] || length[i] == length[j] && first[i] < first[j] {
				length[j], from[j], first[j] = length[i], i, first[i]
			}
			if indeg[j]--; indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	if best < 0 || length[best] == 0 {
		return []string{}
	}
	var path []string
	for i := best; i >= 0; i = from[i] {
		path = append(path, atoms[i].ID)
	}
	slices.Reverse(path)
	return path
}

// choose picks the atoms to show (by index in s.Atoms), see Build.
func (b *builder) choose(opts Options, onPath map[string]bool) []bool {
	atoms := b.s.Atoms
	shown := make([]bool, len(atoms))
	max := opts.MaxNodes
	if max == 0 {
		max = DefaultMaxNodes
	}
	if max < 0 || len(atoms) <= max {
		for i := range shown {
			shown[i] = true
		}
		return shown
	}
	needed := map[string]bool{} // resolved atoms an unresolved one builds on
	for i := range atoms {
		if atoms[i].Status != state.StatusResolved {
			for _, d := range atoms[i].DependsOn {
				needed[b.target(d)] = true
			}
		}
	}
	rank := func(a *state.Atom) int {
		switch {
		case onPath[a.ID]:
			return 0
		case a.Status == state.StatusInProgress:
			return 1
		case b.executable[a.ID]:
			return 2
		case a.Status != state.StatusResolved:
			return 3
		case needed[a.ID]:
			return 4
		}
		return 5
	}
	order := make([]int, len(atoms))
	ranks := make([]int, len(atoms))
	for i := range atoms {
		order[i] = i
		ranks[i] = rank(&atoms[i])
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(ranks[x], ranks[y]) })
	for _, i := range order[:max] {
		shown[i] = true
	}
	return shown
}

// edges lists the arrows between shown nodes, without duplicates, in file
// order of their target.
func (b *builder) edges(pos map[string]int, onPath map[string]bool, path []string) []Edge {
	next := make(map[string]string, len(path)) // critical atom -> the next one
	for i := 1; i < len(path); i++ {
		next[path[i-1]] = path[i]
	}
	critical := func(from, to string) bool { return next[from] == to || next[to] == from }
	type key struct{ from, to string }
	seen := map[key]bool{}
	out := []Edge{}
	add := func(e Edge) {
		_, okFrom := pos[e.From]
		_, okTo := pos[e.To]
		k := key{e.From, e.To}
		if !okFrom || !okTo || e.From == e.To || seen[k] {
			return
		}
		seen[k] = true
		e.Critical = critical(e.From, e.To)
		out = append(out, e)
	}
	for i := range b.s.Atoms {
		a := &b.s.Atoms[i]
		if _, ok := pos[a.ID]; !ok || b.index[a.ID] != i {
			continue
		}
		for _, d := range a.DependsOn {
			e := Edge{From: d, To: a.ID, Kind: KindDepends}
			if dep := b.atom(d); dep != nil && dep.ORGroup != "" && b.group[dep.ORGroup] != nil {
				e.Kind, e.Group = KindOR, dep.ORGroup
				if _, ok := pos[b.target(d)]; ok {
					e.From = b.target(d)
				}
			}
			add(e)
		}
		for _, c := range b.children[a.ID] {
			add(Edge{From: a.ID, To: c, Kind: KindDecomposes})
		}
	}
	return out
}

// Label is a description as a node shows it: on one line, without control
// characters or invalid UTF-8, at most 30 characters.
func Label(desc string) string {
	desc = strings.ToValidUTF8(desc, "\uFFFD")
	desc = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, desc)
	desc = strings.Join(strings.Fields(desc), " ")
	if utf8.RuneCountInString(desc) > labelRunes {
		r := []rune(desc)
		return strings.TrimRight(string(r[:labelRunes-1]), " ") + "…"
	}
	return desc
}
