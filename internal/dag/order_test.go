package dag

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/state"
)

// A planner lists children in any order: C1 may depend on C2 listed after it.
func TestDecomposeChildrenDependOnSiblingsInAnyOrder(t *testing.T) {
	s := build(t, "A1:resolved:", "P:pending:A1")
	kids := []state.Atom{
		{ID: "C1", Description: "uses C2 and C3", DependsOn: []string{"C2", "C3"}},
		{ID: "C2", Description: "uses C3", DependsOn: []string{"C3"}},
		{ID: "C3", Description: "first"},
	}
	if _, err := Decompose(s, "P", kids, "too big"); err != nil {
		t.Fatalf("Decompose = %v; want the children accepted in any order", err)
	}
	// File order is the planner's order; dependencies carry the parent's first.
	if d := cmp.Diff([]string{"A1", "P", "C1", "C2", "C3"}, atomIDs(s)); d != "" {
		t.Errorf("atoms: %s", d)
	}
	if d := cmp.Diff([]string{"A1", "C2", "C3"}, s.Atom("C1").DependsOn); d != "" {
		t.Errorf("C1 deps: %s", d)
	}
	if d := cmp.Diff([]string{"C3"}, ids(Executable(s, 0))); d != "" {
		t.Errorf("executable: %s", d)
	}
	if r := state.Validate(s); !r.Valid() {
		t.Fatalf("invalid: %v", r.Errors)
	}
}

func TestDecomposeRefusesSiblingCyclesAndUnknownIDs(t *testing.T) {
	for _, c := range []struct {
		name string
		kids []state.Atom
		kind error
		msg  string
	}{
		{"two-cycle", []state.Atom{{ID: "C1", Description: "x", DependsOn: []string{"C2"}}, {ID: "C2", Description: "y", DependsOn: []string{"C1"}}}, ErrCycle, "cycle"},
		{"three-cycle", []state.Atom{{ID: "C1", Description: "x", DependsOn: []string{"C3"}}, {ID: "C2", Description: "y", DependsOn: []string{"C1"}}, {ID: "C3", Description: "z", DependsOn: []string{"C2"}}}, ErrCycle, "cycle"},
		{"unknown", []state.Atom{{ID: "C1", Description: "x", DependsOn: []string{"C9"}}, {ID: "C2", Description: "y"}}, ErrUnknownAtom, `"C9" is not an atom`},
		// Q already names X; X -> C2 -> Q closes a cycle through the batch.
		{"through existing", []state.Atom{{ID: "X", Description: "x", DependsOn: []string{"C2"}}, {ID: "C2", Description: "y", DependsOn: []string{"Q"}}}, ErrCycle, "cycle"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := build(t, "P:pending:", "Q:pending:X")
			before := fmt.Sprintf("%+v", *s)
			_, err := Decompose(s, "P", c.kids, "r")
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Decompose = %v; want %v mentioning %q", err, c.kind, c.msg)
			}
			if fmt.Sprintf("%+v", *s) != before {
				t.Error("a refused decomposition changed the state")
			}
		})
	}
}

// A planner's batch of new atoms: any order, each checked on its own.
func TestAddAtomsInAnyOrder(t *testing.T) {
	s := build(t, "A1:resolved:")
	errs := AddAtoms(s, []state.Atom{
		{ID: "N1", Description: "needs N2", DependsOn: []string{"N2", "A1"}},
		{ID: "N2", Description: "needs N3", DependsOn: []string{"N3"}},
		{ID: "N3", Description: "first", ORGroup: "g"},
		{ID: "N4", Description: "second choice", ORGroup: "g"},
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("atom %d: %v", i, err)
		}
	}
	if d := cmp.Diff([]string{"A1", "N1", "N2", "N3", "N4"}, atomIDs(s)); d != "" {
		t.Errorf("atoms: %s", d)
	}
	if g := s.ORGroup("g"); g == nil || !cmp.Equal(g.Choices, []string{"N3", "N4"}) || g.Selected != "N3" {
		t.Errorf("group g = %+v", g)
	}
	if r := state.Validate(s); !r.Valid() {
		t.Fatalf("invalid: %v", r.Errors)
	}
}

func TestAddAtomsRefusesCyclesUnknownIDsAndWhatDependsOnThem(t *testing.T) {
	s := build(t, "A1:resolved:")
	errs := AddAtoms(s, []state.Atom{
		{ID: "K1", Description: "cycle", DependsOn: []string{"K2"}},
		{ID: "K2", Description: "cycle", DependsOn: []string{"K1"}},
		{ID: "U1", Description: "unknown", DependsOn: []string{"NOPE"}},
		{ID: "D1", Description: "after a refused one", DependsOn: []string{"U1"}},
		{ID: "B1", Description: "  "},
		{ID: "OK", Description: "fine", DependsOn: []string{"A1"}},
		{ID: "OK", Description: "twice"},
	})
	want := []struct {
		kind error
		msg  string
	}{
		{ErrCycle, "cycle"}, {ErrCycle, "cycle"},
		{ErrUnknownAtom, `"NOPE" is not an atom`},
		{ErrUnknownAtom, `"U1" is not an atom: it was refused`},
		{ErrInvalid, "description"},
		{nil, ""},
		{ErrDuplicate, "twice"},
	}
	for i, w := range want {
		err := errs[i]
		if w.kind == nil {
			if err != nil {
				t.Errorf("atom %d: %v; want it added", i, err)
			}
			continue
		}
		if !errors.Is(err, w.kind) || !strings.Contains(err.Error(), w.msg) {
			t.Errorf("atom %d: %v; want %v mentioning %q", i, err, w.kind, w.msg)
		}
	}
	if d := cmp.Diff([]string{"A1", "OK"}, atomIDs(s)); d != "" {
		t.Errorf("atoms: %s", d)
	}
}

func atomIDs(s *state.State) []string {
	out := []string{}
	for _, a := range s.Atoms {
		out = append(out, a.ID)
	}
	return out
}
