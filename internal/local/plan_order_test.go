package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// A planner lists a child before the sibling it depends on, and new atoms
// that depend on each other and on a child, in any order: all are accepted.
func TestPlannerChildrenAndAtomsMayDependOnEachOtherInAnyOrder(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}), nil)
	root := engine.ProjectRoot(path)
	ok := succeedAndTouch(root, "N1")
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		switch {
		case t.Role == agent.Planner && t.Atom.ID == "A1":
			return agent.Result{
				Decompositions: []agent.PlannedDecomposition{{Parent: "A1", Reason: "too big", Children: []agent.PlannedAtom{
					{ID: "C1", Description: "needs C2", DependsOn: []string{"C2"}},
					{ID: "C2", Description: "needs N2", DependsOn: []string{"N2"}},
				}}},
				Atoms: []agent.PlannedAtom{
					{ID: "N1", Description: "needs N2 and C1", DependsOn: []string{"N2", "C1"}},
					{ID: "N2", Description: "first"},
					{ID: "K1", Description: "cycle", DependsOn: []string{"K2"}},
					{ID: "K2", Description: "cycle", DependsOn: []string{"K1"}},
					{ID: "U1", Description: "unknown", DependsOn: []string{"NOPE"}},
				},
			}, nil
		case t.Role == agent.Worker && t.Atom.ID == "A1":
			return agent.Result{Success: false, Summary: "too hard"}, nil
		}
		return ok(ctx, t)
	}}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	s := read(t, path)
	for _, id := range []string{"A1", "C1", "C2", "N1", "N2"} {
		if a := s.Atom(id); a == nil || a.Status != state.StatusResolved {
			t.Errorf("atom %s = %+v; want resolved", id, a)
		}
	}
	for _, id := range []string{"K1", "K2", "U1"} {
		if s.Atom(id) != nil {
			t.Errorf("atom %s was added; want it refused", id)
		}
	}
	events, err := journal.Read(journal.PathFor(path))
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{}
	for _, ev := range events {
		if (ev.Type == journal.AddAtom || ev.Type == journal.Decompose) && ev.OK != nil && !*ev.OK {
			refused[ev.Atom] = ev.Reason
		}
	}
	if len(refused) != 3 || !strings.Contains(refused["K1"], "cycle") || !strings.Contains(refused["K2"], "cycle") || !strings.Contains(refused["U1"], `"NOPE" is not an atom`) {
		t.Fatalf("refused = %v; want K1, K2 (cycle) and U1 (unknown)", refused)
	}
}

// An agent gets the state file as an absolute path, in the task and in
// AOT_STATE_FILE, even when aot was given a relative one.
func TestTaskStateFileIsAbsolute(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}), nil)
	root := engine.ProjectRoot(path)
	t.Chdir(root)
	rel := filepath.Join(".claude", "aot-loop-state.md")
	ok := succeedAndTouch(root, "A1")
	fa := &funcAgent{fn: ok}
	out := runEngine(t, rel, fa, nil)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range fa.calls {
		if !filepath.IsAbs(c.StateFile) {
			t.Fatalf("%s task for %s: state_file %q is not absolute", c.Role, c.Atom.ID, c.StateFile)
		}
		got, err := filepath.EvalSymlinks(c.StateFile)
		if err != nil || got != want {
			t.Fatalf("state_file %q leads to %q (%v); want %q", c.StateFile, got, err, want)
		}
		if _, err := os.Stat(c.StateFile); err != nil {
			t.Fatal(err)
		}
	}
}

// A corrupt line in the journal (not the torn last one) does not stop a
// resume: the line is skipped and the results around it are replayed.
func TestCrashReplaySkipsACorruptJournalLine(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}, [2]string{"A2", "A1"}), func(s *state.State) {
		s.Control.Status = state.ControlRunning
		s.Atoms[0].Status = state.StatusInProgress
	})
	root := engine.ProjectRoot(path)
	jpath := journal.PathFor(path)
	jr, err := journal.Open(jpath)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []journal.Event{{Type: journal.RunStart}, {Type: journal.Checkpoint}, {Type: journal.AtomStart, Atom: "A1", Role: "worker", Attempt: 1}} {
		if err := jr.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := jr.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(jpath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\x00\x00 not an event\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	jr, err = journal.Open(jpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := jr.Append(journal.Event{Type: journal.AtomFinish, Atom: "A1", Role: "worker", Attempt: 1, OK: journal.Bool(true), Data: map[string]any{"summary": "A1 built"}}); err != nil {
		t.Fatal(err)
	}
	if err := jr.Close(); err != nil {
		t.Fatal(err)
	}
	ok := succeedAndTouch(root, "A2")
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		if t.Atom.ID == "A1" {
			return agent.Result{Success: false, Summary: "A1 must not be redone"}, nil
		}
		return ok(ctx, t)
	}}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.Completed || fa.count(agent.Worker, "A1") != 0 {
		t.Fatalf("outcome = %+v, A1 redone %d times", out, fa.count(agent.Worker, "A1"))
	}
	if b := read(t, path).Binding("A1"); b == nil || b.Summary != "A1 built" {
		t.Fatalf("A1 binding = %+v", b)
	}
}
