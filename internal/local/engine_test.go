package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// funcAgent is an in-process agent: fn decides each answer.
type funcAgent struct {
	mu    sync.Mutex
	calls []agent.Task
	fn    func(ctx context.Context, t agent.Task) (agent.Result, error)
}

func (f *funcAgent) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, t)
	f.mu.Unlock()
	return f.fn(ctx, t)
}

func (f *funcAgent) count(role agent.Role, atom string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.Role == role && (atom == "" || c.Atom.ID == atom) {
			n++
		}
	}
	return n
}

// project writes a state file whose base case is `test -f done.txt`.
func project(t *testing.T, atoms []state.Atom, edit func(*state.State)) string {
	t.Helper()
	dir := t.TempDir()
	obj := state.Objective{
		Goal: "g", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "done.txt exists",
		BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "test -f done.txt"}},
	}
	s := state.New(obj, atoms, "p")
	if edit != nil {
		edit(s)
	}
	path := filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := state.NewStore(path).Create(s, false); err != nil {
		t.Fatal(err)
	}
	return path
}

func atoms(specs ...[2]string) []state.Atom {
	var out []state.Atom
	for _, sp := range specs {
		a := state.Atom{ID: sp[0], Description: "do " + sp[0], DependsOn: []string{}}
		if sp[1] != "" {
			a.DependsOn = []string{sp[1]}
		}
		out = append(out, a)
	}
	return out
}

func succeedAndTouch(dir, last string) func(ctx context.Context, t agent.Task) (agent.Result, error) {
	return func(ctx context.Context, t agent.Task) (agent.Result, error) {
		if t.Role == agent.Worker && t.Atom.ID == last {
			if err := os.WriteFile(filepath.Join(dir, "done.txt"), []byte("ok"), 0o644); err != nil {
				return agent.Result{}, err
			}
		}
		return agent.Result{Success: true, Feasible: true, Passed: true, Summary: "did " + t.Atom.ID, Artifacts: []string{t.Atom.ID + ".go"}}, nil
	}
}

func runEngine(t *testing.T, path string, a agent.Agent, edit func(*Options)) engine.Outcome {
	t.Helper()
	opts := Options{Settings: engine.Settings{AgentTimeout: 5 * time.Second}, StateFile: path, Agent: a, PollInterval: 10 * time.Millisecond, RetryBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	if edit != nil {
		edit(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := Run(ctx, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out
}

func read(t *testing.T, path string) *state.State {
	t.Helper()
	s, err := state.NewStore(path).Read()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCompletesWhenTheBaseCasePasses(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}, [2]string{"A2", "A1"}, [2]string{"A3", "A1"}, [2]string{"A4", "A2"}), nil)
	root := engine.ProjectRoot(path)
	fa := &funcAgent{fn: succeedAndTouch(root, "A4")}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.Completed || out.ExitCode != 0 {
		t.Fatalf("outcome = %+v", out)
	}
	s := read(t, path)
	if s.Control.Status != state.ControlCompleted {
		t.Errorf("control = %+v", s.Control)
	}
	for _, a := range s.Atoms {
		if a.Status != state.StatusResolved || s.Binding(a.ID) == nil {
			t.Errorf("%s: %s, binding %v", a.ID, a.Status, s.Binding(a.ID))
		}
	}
	// Each agent got only its dependencies' bindings.
	for _, c := range fa.calls {
		if c.Atom.ID == "A4" {
			if _, ok := c.Bindings["A2"]; !ok || len(c.Bindings) != 1 {
				t.Errorf("A4's bindings = %v; want only A2", c.Bindings)
			}
		}
	}
	events, err := journal.Read(journal.PathFor(path))
	if err != nil {
		t.Fatal(err)
	}
	if last := events[len(events)-1]; last.Type != journal.Checkpoint && last.Type != journal.Stop {
		t.Errorf("last event = %+v", last)
	}
}

func TestAgentClaimsDoNotCompleteTheLoop(t *testing.T) {
	// Every worker says success, nothing writes done.txt: the loop must not
	// call itself completed; the planner proposes nothing, so it stalls.
	path := project(t, atoms([2]string{"A1", ""}), nil)
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		return agent.Result{Success: true, Passed: true, Feasible: true}, nil
	}}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.Stalled {
		t.Fatalf("outcome = %+v; want a stall", out)
	}
	if s := read(t, path); s.Control.Status != state.ControlStopped || s.Control.StopReason == nil {
		t.Fatalf("control = %+v", s.Control)
	}
}

func TestFailedORChoiceBacktracks(t *testing.T) {
	path := project(t, atoms([2]string{"B1", ""}, [2]string{"B2", ""}, [2]string{"C", "B1"}), func(s *state.State) {
		s.Atoms[0].ORGroup, s.Atoms[1].ORGroup = "build", "build"
		s.ORGroups = []state.ORGroup{{Name: "build", Choices: []string{"B1", "B2"}, Selected: "B1", Failed: []string{}}}
	})
	root := engine.ProjectRoot(path)
	ok := succeedAndTouch(root, "C")
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		if t.Atom.ID == "B1" {
			return agent.Result{Success: false, Summary: "does not compile"}, nil
		}
		return ok(ctx, t)
	}}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	s := read(t, path)
	g := s.ORGroup("build")
	if g.Selected != "B2" || len(g.Failed) != 1 || len(s.Trail) != 1 {
		t.Fatalf("group = %+v, trail = %+v", g, s.Trail)
	}
}

func TestORExhaustionStops(t *testing.T) {
	path := project(t, atoms([2]string{"B1", ""}, [2]string{"B2", ""}), func(s *state.State) {
		s.Atoms[0].ORGroup, s.Atoms[1].ORGroup = "g", "g"
		s.ORGroups = []state.ORGroup{{Name: "g", Choices: []string{"B1", "B2"}, Selected: "B1", Failed: []string{}}}
		s.Objective.Constraints.MaxStallCount = 10
		s.Objective.Constraints.MaxAttemptsPerAtom = 3
	})
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		return agent.Result{}, &agent.AttemptError{Reason: "crashed"}
	}}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.ORExhausted || out.ExitCode != 6 {
		t.Fatalf("outcome = %+v", out)
	}
	// B1 backtracked at its first failure; B2, the last choice, was retried
	// like any atom before the group gave up.
	if n1, n2 := fa.count(agent.Worker, "B1"), fa.count(agent.Worker, "B2"); n1 != 1 || n2 != 3 {
		t.Fatalf("worker runs: B1 %d, B2 %d; want 1 and 3", n1, n2)
	}
	// The stop names the group and, checked before stopping, the failing check.
	if s := read(t, path); !strings.HasPrefix(deref(s.Control.StopReason), "OR group exhausted: g; the base case fails: base_case: ") {
		t.Fatalf("stop_reason = %q", deref(s.Control.StopReason))
	}
}

func TestAnExhaustedGroupStopsAgainWithTheSameReason(t *testing.T) {
	// Every choice of g failed in an earlier run and a person ran it again:
	// the same state gives the same stop reason, not a deadlock.
	path := project(t, atoms([2]string{"A1", ""}, [2]string{"A2", "A1"}), func(s *state.State) {
		s.Atoms[0].ORGroup = "g"
		s.ORGroups = []state.ORGroup{{Name: "g", Choices: []string{"A1"}, Selected: "A1", Failed: []string{"A1"}}}
	})
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		return agent.Result{}, errors.New("unused")
	}}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.ORExhausted || out.ExitCode != 6 || !strings.Contains(out.Message, "OR group exhausted: g") {
		t.Fatalf("outcome = %+v", out)
	}
	if len(fa.calls) != 0 {
		t.Fatalf("agents ran: %v", fa.calls)
	}
}

func TestFailingAtomIsProbedThenDecomposed(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}), nil)
	root := engine.ProjectRoot(path)
	ok := succeedAndTouch(root, "A1b")
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		switch {
		case t.Role == agent.Planner:
			return agent.Result{Decompositions: []agent.PlannedDecomposition{{Parent: "A1", Reason: "too big", Children: []agent.PlannedAtom{{ID: "A1a", Description: "half"}, {ID: "A1b", Description: "other half", DependsOn: []string{"A1a"}}}}}}, nil
		case t.Role == agent.Worker && t.Atom.ID == "A1":
			return agent.Result{Success: false, Summary: "too hard"}, nil
		}
		return ok(ctx, t)
	}}
	out := runEngine(t, path, fa, func(o *Options) {})
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	if fa.count(agent.Probe, "A1") != 1 || fa.count(agent.Planner, "A1") != 1 || fa.count(agent.Worker, "A1") != 2 {
		t.Fatalf("calls: probe %d planner %d worker %d", fa.count(agent.Probe, "A1"), fa.count(agent.Planner, "A1"), fa.count(agent.Worker, "A1"))
	}
	s := read(t, path)
	if a := s.Atom("A1"); a.Status != state.StatusResolved || s.Binding("A1") == nil {
		t.Fatalf("parent = %+v", a)
	}
}

func TestMaxIterationsBound(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}, [2]string{"A2", "A1"}, [2]string{"A3", "A2"}), nil)
	fa := &funcAgent{fn: succeedAndTouch("", "")}
	out := runEngine(t, path, fa, func(o *Options) { o.MaxIterations = 2 })
	if out.Reason != engine.MaxIterations || out.Iterations != 2 || out.ExitCode != 4 {
		t.Fatalf("outcome = %+v", out)
	}
}

func TestCrashReplayDoesNotRedoJournaledResults(t *testing.T) {
	// The engine died after journaling A1's success but before the state
	// file caught up: the file still says running, A1 in progress.
	path := project(t, atoms([2]string{"A1", ""}, [2]string{"A2", "A1"}), func(s *state.State) {
		s.Control.Status = state.ControlRunning
		s.Atoms[0].Status = state.StatusInProgress
	})
	root := engine.ProjectRoot(path)
	jr, err := journal.Open(journal.PathFor(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []journal.Event{
		{Type: journal.RunStart},
		{Type: journal.Checkpoint},
		{Type: journal.AtomStart, Atom: "A1", Role: "worker", Attempt: 1},
		{Type: journal.AtomFinish, Atom: "A1", Role: "worker", Attempt: 1, OK: journal.Bool(true), Data: map[string]any{"summary": "A1 built", "artifacts": []any{"a1.go"}}},
	} {
		if err := jr.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := jr.Close(); err != nil {
		t.Fatal(err)
	}
	ok := succeedAndTouch(root, "A2")
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		if t.Atom.ID == "A1" {
			return agent.Result{}, errors.New("A1 must not be redone")
		}
		if t.Atom.ID == "A2" {
			if b, ok := t.Bindings["A1"]; !ok || b.Summary != "A1 built" {
				return agent.Result{}, fmt.Errorf("A2 got bindings %v", t.Bindings)
			}
		}
		return ok(ctx, t)
	}}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	if fa.count(agent.Worker, "A1") != 0 {
		t.Fatal("A1 was redone")
	}
	b := read(t, path).Binding("A1")
	if b == nil || b.Summary != "A1 built" || len(b.Artifacts) != 1 || b.Artifacts[0] != "a1.go" {
		t.Fatalf("A1 binding = %+v", b)
	}
}

func TestAgentTimeoutIsAFailedAttempt(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}), func(s *state.State) { s.Objective.Constraints.MaxAttemptsPerAtom = 2 })
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		if t.Role != agent.Worker {
			return agent.Result{Feasible: true}, nil
		}
		<-ctx.Done()
		return agent.Result{}, &agent.AttemptError{Reason: "timed out"}
	}}
	out := runEngine(t, path, fa, func(o *Options) { o.AgentTimeout = 50 * time.Millisecond })
	if out.Reason != engine.MaxAttempts || out.ExitCode != 9 {
		t.Fatalf("outcome = %+v", out)
	}
	a := read(t, path).Atom("A1")
	if a.Status != state.StatusPending || a.Attempts != 2 || a.LastFailure == "" {
		t.Fatalf("atom = %+v", a)
	}
}

func TestBudgetStopsTheLoop(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}, [2]string{"A2", "A1"}), func(s *state.State) { s.Objective.Constraints.MaxTokens = 100 })
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		return agent.Result{Success: true, Usage: agent.Usage{InputTokens: 80, OutputTokens: 40, CostUSD: 0.5}}, nil
	}}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.Budget || out.ExitCode != 8 || out.Usage.InputTokens != 80 {
		t.Fatalf("outcome = %+v", out)
	}
	if fa.count(agent.Worker, "A2") != 0 {
		t.Fatal("A2 ran after the budget was spent")
	}
}

func TestSpeculativeORAdoptsTheFirstSuccessAndKillsTheRest(t *testing.T) {
	path := project(t, atoms([2]string{"S1", ""}, [2]string{"S2", ""}, [2]string{"S3", ""}, [2]string{"C", "S1"}), func(s *state.State) {
		for i := 0; i < 3; i++ {
			s.Atoms[i].ORGroup = "fast"
		}
		s.ORGroups = []state.ORGroup{{Name: "fast", Choices: []string{"S1", "S2", "S3"}, Selected: "S1", Failed: []string{}, Speculative: true}}
	})
	root := engine.ProjectRoot(path)
	ok := succeedAndTouch(root, "C")
	var killed sync.Map
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		switch t.Atom.ID {
		case "S1", "S3": // slow: only a kill ends them
			<-ctx.Done()
			killed.Store(t.Atom.ID, true)
			return agent.Result{Success: true, Summary: "too late"}, nil
		case "S2":
			time.Sleep(30 * time.Millisecond)
			return agent.Result{Success: true, Summary: "S2 won", Artifacts: []string{"s2.go"}}, nil
		}
		return ok(ctx, t)
	}}
	out := runEngine(t, path, fa, func(o *Options) { o.AgentTimeout = 10 * time.Second })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	for _, id := range []string{"S1", "S2", "S3"} {
		if fa.count(agent.Worker, id) != 1 {
			t.Errorf("%s ran %d times; all choices run at once, once", id, fa.count(agent.Worker, id))
		}
	}
	if _, ok := killed.Load("S1"); !ok {
		t.Error("S1 was not killed when S2 won")
	}
	if _, ok := killed.Load("S3"); !ok {
		t.Error("S3 was not killed when S2 won")
	}
	s := read(t, path)
	g := s.ORGroup("fast")
	if g.Selected != "S2" || len(s.Trail) != 1 || s.Trail[0].Selected != "S2" {
		t.Fatalf("group = %+v, trail = %+v", g, s.Trail)
	}
	if s.Binding("S1") != nil || s.Binding("S3") != nil || s.Atom("S1").Status != state.StatusPending {
		t.Fatalf("losers kept results: S1 %+v %+v", s.Atom("S1"), s.Binding("S1"))
	}
}

func TestPromptHoldsOnlyTheAtomItsDependenciesAndTheObjective(t *testing.T) {
	small, large := middleTask(t, 10), middleTask(t, 10_000)
	for _, task := range []agent.Task{small, large} {
		a := task.Atom
		if len(task.Bindings) > len(a.DependsOn) {
			t.Fatalf("task for %s has %d bindings for %d dependencies", a.ID, len(task.Bindings), len(a.DependsOn))
		}
		for id := range task.Bindings {
			if !slices.Contains(a.DependsOn, id) {
				t.Fatalf("task for %s carries the binding of %s, not a dependency", a.ID, id)
			}
		}
	}
	size := func(task agent.Task) int {
		data, _ := json.Marshal(task)
		return len(data)
	}
	if s, l := size(small), size(large); l > s+200 {
		t.Fatalf("the prompt grows with the graph: %d bytes at 10 atoms, %d at 10,000", s, l)
	}
}

func TestUsageLimitStopsWithoutChargingTheAtom(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}), nil)
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		return agent.Result{UsageLimit: true, Summary: "429: quota exceeded"}, nil
	}}
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.UsageLimit || out.ExitCode != 10 {
		t.Fatalf("outcome = %+v", out)
	}
	a := read(t, path).Atom("A1")
	if a.Status != state.StatusPending || a.Attempts != 0 {
		t.Fatalf("atom = %+v; want pending and not charged", a)
	}
	if fa.count(agent.Worker, "A1") != 1 {
		t.Fatalf("the agent was called %d times after its usage limit", len(fa.calls))
	}
}

func TestStopDuringVerificationKillsTheCheck(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}), func(s *state.State) {
		s.Objective.BaseCase = &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "touch checking; sleep 30"}}
	})
	root := engine.ProjectRoot(path)
	fa := &funcAgent{fn: succeedAndTouch(root, "")}
	go func() {
		for i := 0; i < 500; i++ {
			if _, err := os.Stat(filepath.Join(root, "checking")); err == nil {
				_, _ = state.NewStore(path).Update(func(s *state.State) error {
					r := "user"
					s.Control.StopRequested, s.Control.StopReason = true, &r
					return nil
				})
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	start := time.Now()
	out := runEngine(t, path, fa, nil)
	if out.Reason != engine.ManualStop || time.Since(start) > 5*time.Second {
		t.Fatalf("outcome = %+v after %s", out, time.Since(start))
	}
	if s := read(t, path); s.Control.Status != state.ControlStopped || deref(s.Control.StopReason) != "manual stop: user" {
		t.Fatalf("control = %+v", s.Control)
	}
}

func TestProgressShowsStartsFinishesAndWhatRuns(t *testing.T) {
	path := project(t, atoms([2]string{"A1", ""}, [2]string{"A2", ""}), nil)
	root := engine.ProjectRoot(path)
	ok := succeedAndTouch(root, "A2")
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		if t.Atom.ID == "A1" {
			time.Sleep(300 * time.Millisecond)
		}
		return ok(ctx, t)
	}}
	var buf syncBuffer
	out := runEngine(t, path, fa, func(o *Options) { o.Progress = &buf; o.Heartbeat = 50 * time.Millisecond })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	text := buf.String()
	for _, want := range []string{"worker A1 started (attempt 1)", "worker A2 resolved in", "running: worker A1 for", "worker A1 resolved in", "base case passed", "halted: completed"} {
		if !strings.Contains(text, want) {
			t.Errorf("progress lacks %q:\n%s", want, text)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the engine's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestTheJudgeGetsTheCheckInTheStateFilesOwnWords(t *testing.T) {
	th := 4.0
	path := project(t, atoms([2]string{"A", ""}), func(s *state.State) {
		s.Objective.BaseCase = &state.BaseCase{HasChecklist: true, Checklist: []state.ChecklistItem{{Item: "readable", Check: &state.Check{
			Type: state.CheckQuality, Criteria: "the README reads well", PassThreshold: &th,
			Rubric: []state.RubricCriterion{{Criterion: "clarity", Weight: 1, Levels: []state.RubricLevel{{Score: 5, Text: "clear"}}}},
		}}}}
	})
	var got string
	fa := &funcAgent{fn: func(ctx context.Context, t agent.Task) (agent.Result, error) {
		if t.Role == agent.Judge {
			data, _ := json.Marshal(t.Check)
			got = string(data)
		}
		return agent.Result{Success: true, Feasible: true, Passed: true, Score: 5, Evidence: "fine"}, nil
	}}
	runEngine(t, path, fa, nil)
	want := `{"criteria":"the README reads well","pass_threshold":4,"rubric":[{"criterion":"clarity","levels":[{"score":5,"text":"clear"}],"weight":1}],"type":"quality"}`
	if got != want {
		t.Fatalf("judge check = %s\nwant %s", got, want)
	}
}

// deref is *p, "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
