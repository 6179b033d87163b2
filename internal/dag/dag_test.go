package dag

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/state"
)

// build makes a state from compact atom specs "ID:status:dep1,dep2[:group]".
func build(t testing.TB, specs ...string) *state.State {
	t.Helper()
	var atoms []state.Atom
	for _, sp := range specs {
		f := strings.Split(sp, ":")
		a := state.Atom{ID: f[0], Description: "do " + f[0], Status: f[1], DependsOn: []string{}}
		if len(f) > 2 && f[2] != "" {
			a.DependsOn = strings.Split(f[2], ",")
		}
		if len(f) > 3 {
			a.ORGroup = f[3]
		}
		atoms = append(atoms, a)
	}
	s := state.New(state.Objective{Goal: "g"}, atoms, "p")
	for _, a := range atoms {
		if a.ORGroup == "" {
			continue
		}
		if g := s.ORGroup(a.ORGroup); g != nil {
			g.Choices = append(g.Choices, a.ID)
		} else {
			s.ORGroups = append(s.ORGroups, state.ORGroup{Name: a.ORGroup, Choices: []string{a.ID}, Selected: a.ID, Failed: []string{}})
		}
	}
	return s
}

func ids(list []*state.Atom) []string {
	out := []string{}
	for _, a := range list {
		out = append(out, a.ID)
	}
	return out
}

func TestExecutable(t *testing.T) {
	tests := []struct {
		name  string
		s     func(t *testing.T) *state.State
		limit int
		want  []string
	}{
		{"roots and resolved deps", func(t *testing.T) *state.State {
			return build(t, "A1:resolved:", "A2:pending:A1", "A3:pending:A2", "A4:pending:")
		}, 0, []string{"A2", "A4"}},
		{"only the selected OR choice", func(t *testing.T) *state.State {
			return build(t, "B1:pending::g", "B2:pending::g")
		}, 0, []string{"B1"}},
		{"a dependency on any OR member waits for the selected one", func(t *testing.T) *state.State {
			s := build(t, "B1:resolved::g", "B2:pending::g", "C:pending:B2")
			return s
		}, 0, []string{"C"}},
		{"an unselected resolved choice does not satisfy", func(t *testing.T) *state.State {
			s := build(t, "B1:pending::g", "B2:resolved::g", "C:pending:B2")
			return s
		}, 0, []string{"B1"}},
		{"a binding alone does not resolve", func(t *testing.T) *state.State {
			s := build(t, "A1:pending:", "A2:pending:A1")
			s.SetBinding(state.Binding{AtomID: "A1", Summary: "claimed"})
			return s
		}, 0, []string{"A1"}},
		{"decomposed parent waits for its children", func(t *testing.T) *state.State {
			s := build(t, "P:pending:", "P1:pending:", "P2:resolved:")
			s.Decompositions = []state.Decomposition{{Parent: "P", Children: []string{"P1", "P2"}, Reason: "r"}}
			return s
		}, 0, []string{"P1"}},
		{"cap counts atoms in progress", func(t *testing.T) *state.State {
			return build(t, "A1:in_progress:", "A2:pending:", "A3:pending:", "A4:pending:")
		}, 3, []string{"A2", "A3"}},
		{"cap reached", func(t *testing.T) *state.State {
			return build(t, "A1:in_progress:", "A2:pending:")
		}, 1, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, ids(Executable(tt.s(t), tt.limit))); d != "" {
				t.Errorf("Executable (-want +got):\n%s", d)
			}
		})
	}
}

func TestUnresolvedCountsORGroupsOnceAndParentsThroughChildren(t *testing.T) {
	s := build(t, "A1:resolved:", "B1:pending::g", "B2:pending::g", "B3:pending::g", "P:pending:", "P1:pending:", "P2:pending:")
	s.Decompositions = []state.Decomposition{{Parent: "P", Children: []string{"P1", "P2"}, Reason: "r"}}
	if got := Unresolved(s); got != 3 { // the group once, P1, P2
		t.Fatalf("Unresolved = %d, want 3", got)
	}
	s.Atom("B1").Status = state.StatusResolved
	s.Atom("P1").Status = state.StatusResolved
	s.Atom("P2").Status = state.StatusResolved
	if got := Unresolved(s); got != 1 { // P itself, now that its children are done
		t.Fatalf("Unresolved = %d, want 1", got)
	}
}

func TestDeadlockNamesWhatEachAtomWaitsOn(t *testing.T) {
	s := build(t, "A1:pending:A2", "A2:pending:A1", "A3:pending:A1")
	want := []Wait{{Atom: "A1", WaitsOn: []string{"A2"}}, {Atom: "A2", WaitsOn: []string{"A1"}}, {Atom: "A3", WaitsOn: []string{"A1"}}}
	if d := cmp.Diff(want, Deadlock(s)); d != "" {
		t.Fatalf("Deadlock (-want +got):\n%s", d)
	}
	s2 := build(t, "A1:in_progress:", "A2:pending:A1")
	if w := Deadlock(s2); w != nil {
		t.Fatalf("an atom in progress is not a deadlock: %v", w)
	}
	s3 := build(t, "A1:resolved:", "A2:pending:A1")
	if w := Deadlock(s3); w != nil {
		t.Fatalf("an executable atom is not a deadlock: %v", w)
	}
}

func TestAddAtom(t *testing.T) {
	s := build(t, "A1:resolved:", "B1:pending::g")
	if err := AddAtom(s, state.Atom{ID: "A2", Description: "x", DependsOn: []string{"A1"}}); err != nil {
		t.Fatal(err)
	}
	if err := AddAtom(s, state.Atom{ID: "B2", Description: "alt", ORGroup: "g"}); err != nil {
		t.Fatal(err)
	}
	if err := AddAtom(s, state.Atom{ID: "C1", Description: "new group", ORGroup: "h"}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"B1", "B2"}, s.ORGroup("g").Choices); d != "" {
		t.Error(d)
	}
	if h := s.ORGroup("h"); h == nil || h.Selected != "C1" {
		t.Errorf("new group h = %+v", h)
	}
	if r := state.Validate(s); !r.Valid() {
		t.Fatalf("invalid after adds: %v", r.Errors)
	}

	bad := []struct {
		a    state.Atom
		kind error
		msg  string
	}{
		{state.Atom{ID: "A1", Description: "dup"}, ErrDuplicate, "already exists"},
		{state.Atom{ID: "A9", Description: "x", DependsOn: []string{"NOPE"}}, ErrUnknownAtom, `"NOPE"`},
		{state.Atom{ID: "A9", Description: "x", DependsOn: []string{"A9"}}, ErrCycle, "itself"},
		{state.Atom{ID: "A9", Description: "x", DependsOn: []string{"A1", "A1"}}, ErrDuplicate, "twice"},
		{state.Atom{ID: "A9", Description: "  "}, ErrInvalid, "description"},
		{state.Atom{ID: " ", Description: "x"}, ErrInvalid, "blank"},
	}
	for _, b := range bad {
		before := fmt.Sprintf("%+v", *s)
		err := AddAtom(s, b.a)
		if !errors.Is(err, b.kind) || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("AddAtom(%+v) = %v; want %v mentioning %q", b.a, err, b.kind, b.msg)
		}
		if after := fmt.Sprintf("%+v", *s); after != before {
			t.Errorf("AddAtom(%+v) changed the state on failure", b.a)
		}
	}
}

func TestAddAtomRefusesACycleThroughADanglingReference(t *testing.T) {
	// A1 already names X, which does not exist yet: adding X -> A1 closes a cycle.
	s := build(t, "A1:pending:X")
	if err := AddAtom(s, state.Atom{ID: "X", Description: "x", DependsOn: []string{"A1"}}); !errors.Is(err, ErrCycle) {
		t.Fatalf("AddAtom = %v; want ErrCycle", err)
	}
}

func TestDecomposeAndParentAutoResolution(t *testing.T) {
	s := build(t, "A1:resolved:", "P:in_progress:A1", "Q:pending:P")
	inh, err := Decompose(s, "P", []state.Atom{{ID: "P1", Description: "one"}, {ID: "P2", Description: "two", DependsOn: []string{"P1"}}}, "too big")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"A1"}, inh); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]string{"A1", "P1"}, s.Atom("P2").DependsOn); d != "" {
		t.Errorf("P2 deps: %s", d)
	}
	if s.Atom("P").Status != state.StatusPending {
		t.Errorf("parent status = %s, want pending", s.Atom("P").Status)
	}
	if d := cmp.Diff([]string{"P1"}, ids(Executable(s, 0))); d != "" {
		t.Errorf("executable: %s", d)
	}
	// Nested: P1 splits again.
	if _, err := Decompose(s, "P1", []state.Atom{{ID: "P1a", Description: "a"}}, "still big"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"P1a", "P2"} {
		a := s.Atom(id)
		a.Status = state.StatusResolved
		s.SetBinding(state.Binding{AtomID: id, Summary: id + " done", Artifacts: []string{"shared.go", id + ".go"}})
	}
	if got := ResolveParents(s); !cmp.Equal(got, []string{"P1", "P"}) && !cmp.Equal(got, []string{"P1", "P"}) {
		t.Fatalf("ResolveParents = %v, want [P1 P]", got)
	}
	b := s.Binding("P")
	if b == nil || !strings.Contains(b.Summary, "P1") || !strings.Contains(b.Summary, "P2: P2 done") {
		t.Fatalf("parent binding = %+v", b)
	}
	if d := cmp.Diff([]string{"shared.go", "P1a.go", "P2.go"}, b.Artifacts); d != "" {
		t.Errorf("parent artifacts: %s", d)
	}
	if d := cmp.Diff([]string{"Q"}, ids(Executable(s, 0))); d != "" {
		t.Errorf("after auto-resolution: %s", d)
	}
	if r := state.Validate(s); !r.Valid() {
		t.Fatalf("invalid: %v", r.Errors)
	}

	for _, c := range []struct {
		parent string
		kids   []state.Atom
		reason string
		kind   error
	}{
		{"NOPE", []state.Atom{{ID: "Z", Description: "z"}}, "r", ErrUnknownAtom},
		{"A1", []state.Atom{{ID: "Z", Description: "z"}}, "r", ErrTransition},
		{"Q", []state.Atom{{ID: "A1", Description: "z"}}, "r", ErrDuplicate},
		{"Q", []state.Atom{{ID: "Z", Description: "z"}, {ID: "Z", Description: "z"}}, "r", ErrDuplicate},
		{"Q", nil, "r", ErrInvalid},
		{"Q", []state.Atom{{ID: "Z", Description: "z"}}, " ", ErrInvalid},
	} {
		before := fmt.Sprintf("%+v", *s)
		if _, err := Decompose(s, c.parent, c.kids, c.reason); !errors.Is(err, c.kind) {
			t.Errorf("Decompose(%s, %v) = %v; want %v", c.parent, c.kids, err, c.kind)
		}
		if fmt.Sprintf("%+v", *s) != before {
			t.Errorf("Decompose(%s) changed the state on failure", c.parent)
		}
	}
}

func TestSetStatusTransitions(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"pending", "in_progress", true},
		{"in_progress", "resolved", true},
		{"resolved", "pending", true},
		{"in_progress", "pending", true},
		{"pending", "pending", true},
		{"pending", "resolved", false},
		{"resolved", "in_progress", false},
	} {
		s := build(t, "A1:"+c.from+":")
		err := SetStatus(s, "A1", c.to)
		if (err == nil) != c.ok {
			t.Errorf("%s -> %s: err = %v, want ok=%v", c.from, c.to, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrTransition) || s.Atom("A1").Status != c.from) {
			t.Errorf("%s -> %s: %v, status now %s", c.from, c.to, err, s.Atom("A1").Status)
		}
	}
	s := build(t, "A1:pending:")
	if err := SetStatus(s, "A2", "pending"); !errors.Is(err, ErrUnknownAtom) {
		t.Errorf("unknown atom: %v", err)
	}
	if err := SetStatus(s, "A1", "done"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad status: %v", err)
	}
}

func TestFailORBacktracksToExhaustion(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 30, 0, 0, time.FixedZone("CET", 3600))
	s := build(t, "B1:pending::g", "B2:pending::g", "B3:pending::g", "C:pending:B1")
	s.Control.Status = state.ControlRunning
	s.SetBinding(state.Binding{AtomID: "B1", Summary: "partial"})

	res, err := FailOR(s, "B1", "does not build", now)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(FailResult{Group: "g", Failed: "B1", Selected: "B2"}, res); d != "" {
		t.Fatal(d)
	}
	if s.Binding("B1") != nil {
		t.Error("the failed choice keeps its binding")
	}
	want := state.TrailEntry{ORGroup: "g", Selected: "B2", Reason: "B1 failed: does not build", Timestamp: "2026-11-22T09:30:00+01:00"}
	if d := cmp.Diff([]state.TrailEntry{want}, s.Trail); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]string{"B2"}, ids(Executable(s, 0))); d != "" {
		t.Errorf("executable after backtrack: %s", d)
	}
	if _, err := FailOR(s, "B2", "", now); err != nil {
		t.Fatal(err)
	}
	res, err = FailOR(s, "B3", "", now)
	if err != nil || !res.Exhausted {
		t.Fatalf("FailOR(B3) = %+v, %v; want exhausted", res, err)
	}
	if s.Control.Status != state.ControlStopped || s.Control.StopReason == nil || *s.Control.StopReason != "OR group exhausted: g" {
		t.Fatalf("control = %+v", s.Control)
	}
	if d := cmp.Diff([]string{"B1", "B2", "B3"}, s.ORGroup("g").Failed); d != "" {
		t.Error(d)
	}
	if r := state.Validate(s); !r.Valid() {
		t.Fatalf("invalid: %v", r.Errors)
	}
	if _, err := FailOR(s, "C", "", now); !errors.Is(err, ErrInvalid) {
		t.Errorf("FailOR of a plain atom = %v", err)
	}
}

func TestSwitchOR(t *testing.T) {
	now := time.Now()
	s := build(t, "B1:pending::g", "B2:pending::g")
	s.ORGroup("g").Failed = []string{"B2"}
	if err := SwitchOR(s, "g", "B2", "a person knows better", now); err != nil {
		t.Fatal(err)
	}
	if g := s.ORGroup("g"); g.Selected != "B2" || len(g.Failed) != 0 || len(s.Trail) != 1 {
		t.Fatalf("group = %+v, trail = %v", g, s.Trail)
	}
	for _, c := range [][2]string{{"nog", "B1"}, {"g", "X"}} {
		if err := SwitchOR(s, c[0], c[1], "r", now); !errors.Is(err, ErrUnknownAtom) || len(s.Trail) != 1 {
			t.Errorf("SwitchOR(%v) = %v, trail %d", c, err, len(s.Trail))
		}
	}
}

// chain returns a state whose atoms form one dependency chain of length n.
func chain(n int) *state.State {
	atoms := make([]state.Atom, n)
	for i := range atoms {
		atoms[i] = state.Atom{ID: fmt.Sprintf("A%d", i), Description: "x", Status: state.StatusPending, DependsOn: []string{}}
		if i > 0 {
			atoms[i].DependsOn = []string{fmt.Sprintf("A%d", i-1)}
		}
	}
	return state.New(state.Objective{Goal: "g"}, atoms, "p")
}

func TestHundredThousandChain(t *testing.T) {
	s := chain(100_000)
	if d := cmp.Diff([]string{"A0"}, ids(Executable(s, 0))); d != "" {
		t.Fatal(d)
	}
	// A dangling reference at the far end forces a walk of the whole chain.
	s.Atoms[0].DependsOn = []string{"LAST"}
	if err := AddAtom(s, state.Atom{ID: "LAST", Description: "x", DependsOn: []string{"A99999"}}); !errors.Is(err, ErrCycle) {
		t.Fatalf("AddAtom = %v; want ErrCycle", err)
	}
	if got := Unresolved(s); got != 100_000 {
		t.Fatalf("Unresolved = %d", got)
	}
}

func BenchmarkExecutable(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		s := chain(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				Executable(s, 3)
			}
		})
	}
}

func TestSetStatusWaitsForDependencies(t *testing.T) {
	s := build(t, "A:pending:", "B:pending:A", "C1:pending::g", "C2:pending::g", "D:pending:C1")
	err := SetStatus(s, "B", state.StatusInProgress)
	if !errors.Is(err, ErrTransition) || !strings.Contains(err.Error(), "B cannot be in_progress yet: its dependency A is pending; resolve A first") {
		t.Errorf("B in_progress before A: %v", err)
	}
	s.Atom("B").Status = state.StatusInProgress
	if err := SetStatus(s, "B", state.StatusResolved); err == nil || !strings.Contains(err.Error(), "B cannot be resolved yet") {
		t.Errorf("B resolved before A: %v", err)
	}
	if err := SetStatus(s, "B", state.StatusPending); err != nil {
		t.Errorf("back to pending is always allowed: %v", err)
	}
	if err := SetStatus(s, "D", state.StatusInProgress); err == nil || !strings.Contains(err.Error(), "its dependency C1 (the selected choice of OR group g) is pending") {
		t.Errorf("D before its OR group: %v", err)
	}
	s.Atom("A").Status = state.StatusResolved
	if err := SetStatus(s, "B", state.StatusInProgress); err != nil {
		t.Errorf("B once A is resolved: %v", err)
	}
}

func TestNewAtomsNeedASafeID(t *testing.T) {
	s := build(t, "A:pending:")
	for _, id := range []string{"two words", "a/b", "$(touch x)", "-rf"} {
		err := AddAtom(s, state.Atom{ID: id, Description: "x"})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), state.IDRule) {
			t.Errorf("AddAtom(%q) = %v; want the id rule", id, err)
		}
		if _, err := Decompose(s, "A", []state.Atom{{ID: id, Description: "x"}}, "r"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decompose with child %q = %v; want ErrInvalid", id, err)
		}
	}
	if len(s.Atoms) != 1 {
		t.Errorf("atoms added: %d", len(s.Atoms))
	}
}
