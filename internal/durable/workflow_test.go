package durable

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// world fakes the workers: attempts, merges and verification answer at
// once, as the test says, and it records what the workflow asked.
type world struct {
	mu       sync.Mutex
	attempts []AttemptInput // the workers'
	others   []AttemptInput // probes and planners
	merges   []string       // atoms, in merge order
	verifies int
	judged   int // verifications asked to judge
	head     int
	// answer decides a worker's attempt; nil: success with a commit.
	answer func(in AttemptInput) (AttemptResult, error)
	// other decides a probe's or planner's; nil: feasible, nothing to add.
	other func(in AttemptInput) (AttemptResult, error)
	// conflict decides a merge's conflict; nil: none.
	conflict func(in MergeInput) bool
	passed   bool
	cleaned  []CleanInput // the loop's branch cleanups
	batches  [][]string   // the atoms of each MergeBatch, as atom#attempt
}

func newWorld() *world { return &world{passed: true} }

func (w *world) attempt(ctx context.Context, in AttemptInput) (AttemptResult, error) {
	w.mu.Lock()
	if in.Task.Role != agent.Worker {
		w.others = append(w.others, in)
		other := w.other
		w.mu.Unlock()
		if other != nil {
			return other(in)
		}
		return AttemptResult{Result: agent.Result{Feasible: true, Findings: "looked at " + in.Task.Atom.ID}, Worker: "test"}, nil
	}
	w.attempts = append(w.attempts, in)
	answer := w.answer
	w.mu.Unlock()
	if answer != nil {
		return answer(in)
	}
	return success(in), nil
}

func success(in AttemptInput) AttemptResult {
	return AttemptResult{Result: agent.Result{Success: true, Summary: "did " + in.Task.Atom.ID, Artifacts: []string{in.Task.Atom.ID + ".go"},
		Usage: agent.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.01}}, Commit: "c-" + in.Branch, Files: []string{in.Task.Atom.ID + ".go"}, Worker: "test"}
}

func failure(why string) AttemptResult {
	return AttemptResult{Result: agent.Result{Summary: why}, Worker: "test"}
}

func (w *world) merge(ctx context.Context, in MergeInput) (MergeResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conflict != nil && w.conflict(in) {
		return MergeResult{Commit: fmt.Sprintf("head-%d", w.head), Conflict: true}, nil
	}
	w.head++
	w.merges = append(w.merges, in.Atom)
	return MergeResult{Commit: fmt.Sprintf("head-%d", w.head)}, nil
}

func (w *world) clean(ctx context.Context, in CleanInput) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cleaned = append(w.cleaned, in)
	return nil
}

func (w *world) verify(ctx context.Context, in VerifyInput) (VerifyResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verifies++
	if in.Judge {
		w.judged++
	}
	if w.passed {
		return VerifyResult{Report: verify.Report{Passed: true, Checklist: []verify.ItemResult{{Item: "tests", Passed: true}}}}, nil
	}
	return VerifyResult{Report: verify.Report{Checklist: []verify.ItemResult{{Item: "tests", Evidence: "go test failed"}}}}, nil
}

// roles lists the probes' and planners' runs, in order: "probe A".
func (w *world) roles() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, in := range w.others {
		out = append(out, fmt.Sprintf("%s %s", in.Task.Role, in.Task.Atom.ID))
	}
	return out
}

// tried lists the atoms of the attempts, in order.
func (w *world) tried() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, in := range w.attempts {
		out = append(out, fmt.Sprintf("%s#%d", in.Task.Atom.ID, in.Task.Attempt))
	}
	return out
}

func (w *world) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterWorkflowWithOptions(Loop, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivityWithOptions(w.attempt, activity.RegisterOptions{Name: AttemptActivity})
	env.RegisterActivityWithOptions(w.merge, activity.RegisterOptions{Name: MergeActivity})
	env.RegisterActivityWithOptions(w.mergeBatch, activity.RegisterOptions{Name: MergeBatchActivity})
	env.RegisterActivityWithOptions(w.verify, activity.RegisterOptions{Name: VerifyActivity})
	env.RegisterActivityWithOptions(w.clean, activity.RegisterOptions{Name: CleanActivity})
}

// loopState builds a state file's bytes.
func loopState(c state.Constraints, atoms []state.Atom, edit func(*state.State)) []byte {
	s := state.New(state.Objective{Goal: "build it", BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "go test ./..."}}, Constraints: c}, atoms, "build it")
	s.Control.Status = state.ControlRunning
	if edit != nil {
		edit(s)
	}
	return state.Marshal(s)
}

func atom(id string, deps ...string) state.Atom {
	return state.Atom{ID: id, Description: "do " + id, DependsOn: deps}
}

type run struct {
	env *testsuite.TestWorkflowEnvironment
	w   *world
}

func newRun(t *testing.T, w *world) *run {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "loop-1", TaskQueue: DefaultTaskQueue})
	w.register(env)
	return &run{env: env, w: w}
}

// execute runs the workflow to its end and returns its outcome.
func (r *run) execute(t *testing.T, in LoopInput) Outcome {
	t.Helper()
	r.env.ExecuteWorkflow(WorkflowName, in)
	if !r.env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var out Outcome
	if err := r.env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// final is the state the status query answers after the end.
func (r *run) final(t *testing.T) (*state.State, Status) {
	t.Helper()
	v, err := r.env.QueryWorkflow(QueryStatus, 0)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	s, err := state.Parse(st.State)
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

func input(data []byte) LoopInput {
	return LoopInput{State: data, Repo: "git@example.com:r.git", Base: "aot/loop-1", BaseCommit: "head-0"}
}

func wantReason(t *testing.T, out Outcome, r engine.Reason) {
	t.Helper()
	if out.Reason != string(r) || out.ExitCode != r.ExitCode() {
		t.Fatalf("outcome %+v, want reason %s (exit %d)", out, r, r.ExitCode())
	}
}

func TestWorkflowCompletesMergingInDependencyOrder(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	// C is first in the file but depends on both others.
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("C", "A", "B"), atom("B", "A"), atom("A")}, nil)))
	wantReason(t, out, engine.Completed)
	if diff := cmp.Diff([]string{"A", "B", "C"}, w.merges); diff != "" {
		t.Errorf("merge order (-want +got):\n%s", diff)
	}
	base := map[string]string{}
	for _, in := range w.attempts {
		base[in.Task.Atom.ID] = in.BaseCommit
		if want := "aot/loop-1/" + in.Task.Atom.ID + "-1"; in.Branch != want {
			t.Errorf("branch %s, want %s", in.Branch, want)
		}
	}
	if diff := cmp.Diff(map[string]string{"A": "head-0", "B": "head-1", "C": "head-2"}, base); diff != "" {
		t.Errorf("base commits (-want +got):\n%s", diff)
	}
	// Only the dependencies' bindings go to an agent.
	last := w.attempts[2].Task
	if got := sortedKeys(last.Bindings); !slices.Equal(got, []string{"A", "B"}) || last.Bindings["A"].Summary != "did A" {
		t.Errorf("C's bindings: %+v", last.Bindings)
	}
	s, st := r.final(t)
	for _, a := range s.Atoms {
		if a.Status != state.StatusResolved {
			t.Errorf("%s is %s", a.ID, a.Status)
		}
	}
	if s.Control.Status != state.ControlCompleted || !st.Done || st.Outcome == nil || st.Usage.InputTokens != 30 {
		t.Errorf("final status: control %s, done %t, outcome %v, usage %+v", s.Control.Status, st.Done, st.Outcome, st.Usage)
	}
	if b := s.Binding("B"); b == nil || b.Summary != "did B" || !slices.Equal(b.Artifacts, []string{"B.go"}) {
		t.Errorf("B's binding: %+v", b)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func TestWorkflowRetriesAFailedAttempt(t *testing.T) {
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Attempt == 1 {
			return failure("tests fail"), nil
		}
		return success(in), nil
	}
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Completed)
	if diff := cmp.Diff([]string{"A#1", "A#2"}, w.tried()); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if lf := w.attempts[1].Task.LastFailure; !strings.Contains(lf, "tests fail") {
		t.Errorf("the retry's last failure: %q", lf)
	}
	s, _ := r.final(t)
	if a := s.Atom("A"); a.Attempts != 1 || a.LastFailure != "" || a.Status != state.StatusResolved {
		t.Errorf("A: %+v", a)
	}
}

func TestWorkflowMergeConflictRetriesOnTheNewHead(t *testing.T) {
	w := newWorld()
	// One agent at a time: B starts on head-0 while A's merge runs, so its
	// merge conflicts; its retry starts on A's merge.
	w.conflict = func(in MergeInput) bool { return in.Branch == "aot/loop-1/B-1" }
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{MaxParallelAgents: 1}, []state.Atom{atom("A"), atom("B")}, nil)))
	wantReason(t, out, engine.Completed)
	if b2 := w.attemptOn("aot/loop-1/B-2"); b2.BaseCommit != "head-1" || !strings.Contains(b2.Task.LastFailure, "conflict: ") {
		t.Errorf("B's second attempt: base %q, last failure %q", b2.BaseCommit, b2.Task.LastFailure)
	}
}

func TestWorkflowMaxAttemptsStops(t *testing.T) {
	w := newWorld()
	w.passed = false
	w.answer = func(in AttemptInput) (AttemptResult, error) { return failure("no way"), nil }
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{MaxAttemptsPerAtom: 3, MaxStallCount: 10}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.MaxAttempts)
	if !strings.Contains(out.Message, "A failed 3 times") || !strings.Contains(out.Message, "the base case fails") {
		t.Errorf("message: %s", out.Message)
	}
	s, _ := r.final(t)
	if a := s.Atom("A"); a.Attempts != 3 || s.Control.Status != state.ControlStopped {
		t.Errorf("A: %+v, control %+v", a, s.Control)
	}
}

func orState(c state.Constraints) []byte {
	return loopState(c, []state.Atom{
		{ID: "X1", Description: "the first way", ORGroup: "way"},
		{ID: "X2", Description: "the second way", ORGroup: "way"},
		atom("D", "X1"),
	}, func(s *state.State) {
		s.ORGroups = []state.ORGroup{{Name: "way", Choices: []string{"X1", "X2"}, Selected: "X1", Failed: []string{}}}
	})
}

func TestWorkflowORGroupBacktracks(t *testing.T) {
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Atom.ID == "X1" {
			return failure("X1 cannot work"), nil
		}
		return success(in), nil
	}
	r := newRun(t, w)
	out := r.execute(t, input(orState(state.Constraints{})))
	wantReason(t, out, engine.Completed)
	if diff := cmp.Diff([]string{"X1#1", "X2#1", "D#1"}, w.tried()); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	s, _ := r.final(t)
	g := s.ORGroup("way")
	if g.Selected != "X2" || !slices.Equal(g.Failed, []string{"X1"}) {
		t.Errorf("group: %+v", g)
	}
	if len(s.Trail) != 1 || s.Trail[0].Selected != "X2" || !strings.Contains(s.Trail[0].Reason, "X1 failed") {
		t.Errorf("trail: %+v", s.Trail)
	}
}

func TestWorkflowORGroupExhausted(t *testing.T) {
	w := newWorld()
	w.passed = false
	w.answer = func(in AttemptInput) (AttemptResult, error) { return failure("nope"), nil }
	r := newRun(t, w)
	out := r.execute(t, input(orState(state.Constraints{MaxAttemptsPerAtom: 2})))
	wantReason(t, out, engine.ORExhausted)
	if diff := cmp.Diff([]string{"X1#1", "X2#1", "X2#2"}, w.tried()); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}

func TestWorkflowMaxIterations(t *testing.T) {
	w := newWorld()
	w.passed = false
	w.answer = func(in AttemptInput) (AttemptResult, error) { return failure("no"), nil }
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{MaxIterations: 3, MaxStallCount: 10, MaxAttemptsPerAtom: 10}, []state.Atom{atom("A"), atom("B")}, nil)))
	wantReason(t, out, engine.MaxIterations)
	s, _ := r.final(t)
	// A sweep is one attempt of each executable atom.
	if s.Control.Iteration != 3 || len(w.attempts) != 6 {
		t.Errorf("iterations %d, attempts %v", s.Control.Iteration, w.tried())
	}
}

func TestWorkflowStall(t *testing.T) {
	w := newWorld()
	w.passed = false
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Atom.ID == "A" {
			return success(in), nil
		}
		return failure("no"), nil
	}
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{MaxIterations: 20, MaxStallCount: 2, MaxAttemptsPerAtom: 10}, []state.Atom{atom("A"), atom("B")}, nil)))
	wantReason(t, out, engine.Stalled)
	s, _ := r.final(t)
	// The first sweep resolved A (progress); the next two did nothing.
	if s.Control.Iteration != 3 || s.Control.StallCount != 2 {
		t.Errorf("control: %+v", s.Control)
	}
}

func TestWorkflowCrashesAreNotStalls(t *testing.T) {
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		if in.Task.Attempt < 4 {
			return AttemptResult{Kind: agent.KindCrash, Reason: "exit status 2", Unknown: true}, nil
		}
		return success(in), nil
	}
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{MaxStallCount: 2}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Completed)
	if _, st := r.final(t); st.Iteration != 4 {
		t.Errorf("iterations %d, want 4", st.Iteration)
	}
}

// slowAttempts makes every attempt take d on the workflow's clock.
func slowAttempts(r *run, d time.Duration, answer func(in AttemptInput) AttemptResult) {
	r.env.OnActivity(AttemptActivity, mock.Anything, mock.Anything).After(d).Return(func(ctx context.Context, in AttemptInput) (AttemptResult, error) {
		r.w.mu.Lock()
		r.w.attempts = append(r.w.attempts, in)
		r.w.mu.Unlock()
		return answer(in), nil
	})
}

func TestWorkflowMaxWallTime(t *testing.T) {
	w := newWorld()
	w.passed = false
	r := newRun(t, w)
	slowAttempts(r, 20*time.Minute, func(in AttemptInput) AttemptResult { return failure("no") })
	out := r.execute(t, input(loopState(state.Constraints{MaxWallTime: "1h", MaxStallCount: 100, MaxIterations: 100, MaxAttemptsPerAtom: 100}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Budget)
	// Two attempts finished; the third was running at the hour and cancelled.
	if !strings.Contains(out.Message, "max_wall_time 1h") || len(w.attempts) != 2 {
		t.Errorf("message %q after %d attempts", out.Message, len(w.attempts))
	}
}

func TestWorkflowBudgetLandsTheMergesUnderWay(t *testing.T) {
	w := newWorld()
	w.passed = false
	r := newRun(t, w)
	slowAttempts(r, 10*time.Minute, success) // 15 tokens each
	out := r.execute(t, input(loopState(state.Constraints{MaxParallelAgents: 2, MaxTokens: 20}, []state.Atom{atom("A"), atom("B"), atom("C", "A")}, nil)))
	wantReason(t, out, engine.Budget)
	if !strings.Contains(out.Message, "30 tokens spent") {
		t.Errorf("message: %s", out.Message)
	}
	// Both finished attempts (at the same time, so in either order) were
	// merged before the stop, and the state says so; C never started.
	s, _ := r.final(t)
	if diff := cmp.Diff([]string{"A", "B"}, slices.Sorted(slices.Values(w.merges))); diff != "" {
		t.Errorf("merges (-want +got):\n%s", diff)
	}
	for id, want := range map[string]string{"A": state.StatusResolved, "B": state.StatusResolved, "C": state.StatusPending} {
		if got := s.Atom(id).Status; got != want {
			t.Errorf("%s is %s, want %s", id, got, want)
		}
	}
}

func TestWorkflowUsageLimit(t *testing.T) {
	t.Run("without a reset time the loop stops", func(t *testing.T) {
		w := newWorld()
		w.passed = false
		w.answer = func(in AttemptInput) (AttemptResult, error) {
			return AttemptResult{Result: agent.Result{UsageLimit: true}}, nil
		}
		r := newRun(t, w)
		out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil)))
		wantReason(t, out, engine.UsageLimit)
		s, _ := r.final(t)
		if a := s.Atom("A"); a.Attempts != 0 || a.Status != state.StatusPending {
			t.Errorf("the atom was charged: %+v", a)
		}
	})
	t.Run("with one the loop waits for it", func(t *testing.T) {
		w := newWorld()
		r := newRun(t, w)
		reset := r.env.Now().Add(3 * time.Hour).Truncate(time.Second)
		n := 0
		w.answer = func(in AttemptInput) (AttemptResult, error) {
			if n++; n == 1 {
				return AttemptResult{Result: agent.Result{UsageLimit: true, RetryAt: reset.Format(time.RFC3339)}}, nil
			}
			return success(in), nil
		}
		out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil)))
		wantReason(t, out, engine.Completed)
		if len(w.attempts) != 2 || r.env.Now().Before(reset) {
			t.Errorf("%d attempts, ended at %s, before the reset at %s", len(w.attempts), r.env.Now(), reset)
		}
	})
}

func TestWorkflowCostBudget(t *testing.T) {
	w := newWorld()
	w.passed = false
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		r := failure("no")
		r.Result.Usage.CostUSD = 0.4
		return r, nil
	}
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{MaxCostUSD: 1}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Budget)
	if len(w.attempts) != 3 || !strings.Contains(out.Message, "max_cost_usd 1") {
		t.Errorf("%d attempts: %s", len(w.attempts), out.Message)
	}
}

func TestWorkflowDecomposedParentResolvesWithItsChildren(t *testing.T) {
	w := newWorld()
	r := newRun(t, w)
	data := loopState(state.Constraints{}, []state.Atom{atom("P"), atom("K1"), atom("K2", "K1"), atom("Z", "P")}, func(s *state.State) {
		s.Decompositions = []state.Decomposition{{Parent: "P", Children: []string{"K1", "K2"}, Reason: "too big"}}
	})
	wantReason(t, r.execute(t, input(data)), engine.Completed)
	// The parent is never run: it resolves when its children have, and
	// then what depends on it runs.
	if diff := cmp.Diff([]string{"K1#1", "K2#1", "Z#1"}, w.tried()); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	s, _ := r.final(t)
	if b := s.Binding("P"); s.Atom("P").Status != state.StatusResolved || b == nil || !strings.Contains(b.Summary, "K2") {
		t.Errorf("P: %+v, binding %+v", s.Atom("P"), b)
	}
}

func TestWorkflowBaseCaseFailsWithNothingLeft(t *testing.T) {
	w := newWorld()
	w.passed = false
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil)))
	wantReason(t, out, engine.Stalled)
	if !strings.Contains(out.Message, "tests: go test failed") || w.verifies != 1 {
		t.Errorf("after %d verifications: %s", w.verifies, out.Message)
	}
}
