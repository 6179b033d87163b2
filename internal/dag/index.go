package dag

import "github.com/aot-loop/aot/internal/state"

// Index answers work-graph questions about one state in constant time per
// atom, for a caller that changes statuses often (the engine). It stays valid
// while only statuses and bindings change; after any change of the graph's
// shape (atoms added or removed, decompositions, OR groups) build a new one.
type Index struct {
	g      *graph
	rdeps  map[string][]string // atom -> atoms that name it in depends_on
	parent map[string]string   // decomposition child -> parent
}

// NewIndex indexes s.
func NewIndex(s *state.State) *Index {
	x := &Index{g: newGraph(s), rdeps: make(map[string][]string, len(s.Atoms))}
	for i := range s.Atoms {
		for _, d := range s.Atoms[i].DependsOn {
			x.rdeps[d] = append(x.rdeps[d], s.Atoms[i].ID)
		}
	}
	for _, d := range s.Decompositions {
		for _, c := range d.Children {
			if x.parent == nil {
				x.parent = map[string]string{}
			}
			x.parent[c] = d.Parent
		}
	}
	return x
}

// Atom returns the atom with the id, or nil.
func (x *Index) Atom(id string) *state.Atom { return x.g.atom(id) }

// Ready reports whether the atom is executable now (see Executable).
func (x *Index) Ready(id string) bool {
	a := x.g.atom(id)
	return a != nil && a.Status == state.StatusPending && x.g.ready(a)
}

// Affected returns the atoms whose readiness may change when id is resolved:
// the atoms that depend on it (on any member of its OR group, if it is in one)
// and its decomposition parent.
func (x *Index) Affected(id string) []string {
	out := append([]string(nil), x.rdeps[id]...)
	if a := x.g.atom(id); a != nil {
		if grp := x.g.orGroupOf(a); grp != nil {
			for _, c := range grp.Choices {
				if c != id {
					out = append(out, x.rdeps[c]...)
				}
			}
		}
	}
	if p, ok := x.parent[id]; ok {
		out = append(out, p)
	}
	return out
}

// Dependents returns the atoms that name id in depends_on.
func (x *Index) Dependents(id string) []string { return x.rdeps[id] }

// Live reports whether the atom counts for progress (see Unresolved).
func (x *Index) Live(id string) bool {
	a := x.g.atom(id)
	return a != nil && x.g.live(a)
}

// IsChild reports whether the atom is a decomposition child.
func (x *Index) IsChild(id string) bool {
	_, ok := x.parent[id]
	return ok
}

// Position is the atom's index in the state's atom list, -1 if unknown.
func (x *Index) Position(id string) int {
	if i, ok := x.g.index[id]; ok {
		return i
	}
	return -1
}
