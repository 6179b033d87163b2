package local

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// chaosAgent misbehaves at random: it fails, hangs past its deadline,
// crashes, answers garbage, lies about success, or plans nonsense. Only an
// honest success writes the atom's proof file.
type chaosAgent struct {
	mu  sync.Mutex
	r   *rand.Rand
	dir string
	// weights of succeed, fail, hang, crash, garbage, lie
	w [6]int
}

func (c *chaosAgent) pick() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for _, w := range c.w {
		total += w
	}
	n := c.r.IntN(total)
	for i, w := range c.w {
		if n < w {
			return i
		}
		n -= w
	}
	return 0
}

func (c *chaosAgent) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	u := agent.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.001}
	switch c.pick() {
	case 1:
		return agent.Result{Success: false, Feasible: false, Passed: false, Summary: "failed on purpose", Usage: u}, nil
	case 2:
		<-ctx.Done()
		return agent.Result{}, &agent.AttemptError{Reason: "timed out", Usage: u}
	case 3:
		return agent.Result{}, &agent.AttemptError{Reason: "agent exited with signal: killed"}
	case 4:
		return agent.Result{}, &agent.AttemptError{Reason: "malformed answer: not JSON"}
	case 5:
		return agent.Result{Success: true, Feasible: true, Passed: true, Summary: "trust me", Usage: u}, nil
	}
	switch t.Role {
	case agent.Planner:
		c.mu.Lock()
		n := c.r.IntN(3)
		c.mu.Unlock()
		var res agent.Result
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("P%d_%d", t.Attempt, i)
			res.Atoms = append(res.Atoms, agent.PlannedAtom{ID: id, Description: "planned", DependsOn: []string{"NOPE"}[:i%2]})
		}
		if t.Atom.ID != "base_case" {
			res.Decompositions = []agent.PlannedDecomposition{{Parent: t.Atom.ID, Reason: "split", Children: []agent.PlannedAtom{{ID: t.Atom.ID + "x", Description: "part"}}}}
		}
		res.Usage = u
		return res, nil
	case agent.Worker:
		if err := os.WriteFile(filepath.Join(c.dir, t.Atom.ID+".ok"), nil, 0o644); err != nil {
			return agent.Result{}, err
		}
	}
	return agent.Result{Success: true, Feasible: true, Passed: true, Summary: "honest", Usage: u}, nil
}

// randomState is a random DAG with some OR groups; its base case needs the
// proof file of every atom of the original graph that is not an OR choice,
// and of some choice of each group.
func randomState(r *rand.Rand) *state.State {
	n := 2 + r.IntN(12)
	atoms := layered(n, 1+r.IntN(4), r.Uint64())
	var proofs string
	s := state.New(state.Objective{Goal: "g", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c"}, atoms, "p")
	for g := 0; g < r.IntN(3); g++ {
		i := r.IntN(n)
		a := &s.Atoms[i]
		if a.ORGroup != "" {
			continue
		}
		name := fmt.Sprintf("g%d", g)
		a.ORGroup = name
		alt := state.Atom{ID: a.ID + "_alt", Description: "alternative", Status: state.StatusPending, DependsOn: append([]string{}, a.DependsOn...), ORGroup: name}
		s.Atoms = append(s.Atoms, alt)
		s.ORGroups = append(s.ORGroups, state.ORGroup{Name: name, Choices: []string{a.ID, alt.ID}, Selected: a.ID, Failed: []string{}, Speculative: r.IntN(2) == 0})
		proofs += fmt.Sprintf(" && { test -f %s.ok || test -f %s.ok; }", a.ID, alt.ID)
	}
	for _, a := range atoms {
		if s.Atom(a.ID).ORGroup == "" {
			proofs += fmt.Sprintf(" && test -f %s.ok", a.ID)
		}
	}
	s.Objective.BaseCase = &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "true" + proofs}}
	c := &s.Objective.Constraints
	c.MaxIterations = 5 + r.IntN(40)
	c.MaxParallelAgents = 1 + r.IntN(4)
	c.MaxStallCount = 1 + r.IntN(4)
	if r.IntN(3) == 0 {
		c.MaxAttemptsPerAtom = 1 + r.IntN(4)
	}
	if r.IntN(4) == 0 {
		c.MaxTokens = int64(50 + r.IntN(500))
	}
	return s
}

// TestPropertyAlwaysHaltsAndNeverFakesCompletion drives the engine with
// randomly misbehaving agents over random DAGs. Every run must halt within
// its bounds, leave a valid state file, and be completed only when the base
// case really passes.
func TestPropertyAlwaysHaltsAndNeverFakesCompletion(t *testing.T) {
	runs := 60
	if testing.Short() {
		runs = 15
	}
	reasons := map[engine.Reason]int{}
	for seed := 1; seed <= runs; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 42))
		s := randomState(r)
		dir := t.TempDir()
		path := filepath.Join(dir, ".claude", "aot-loop-state.md")
		if err := state.NewStore(path).Create(s, false); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		ca := &chaosAgent{r: rand.New(rand.NewPCG(uint64(seed), 7)), dir: dir}
		ca.w = [6]int{3 + r.IntN(10), r.IntN(4), r.IntN(2), r.IntN(3), r.IntN(3), r.IntN(4)}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		start := time.Now()
		out, err := Run(ctx, Options{Settings: engine.Settings{AgentTimeout: 20 * time.Millisecond}, StateFile: path, Agent: ca, PollInterval: 5 * time.Millisecond, RetryBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		cancel()
		if err != nil {
			t.Fatalf("seed %d: Run: %v", seed, err)
		}
		reasons[out.Reason]++
		if out.Reason == engine.Deadlock {
			t.Logf("seed %d: %s", seed, out.Message)
		}
		if time.Since(start) > 30*time.Second || out.Reason == engine.ManualStop {
			t.Fatalf("seed %d: did not halt by itself in time: %+v", seed, out)
		}
		// Repair sweeps (work a check found broken, redone) are not charged.
		repairs := 0
		for _, ev := range events(t, path, journal.Iteration) {
			if r, _ := ev.Data["repair"].(bool); r {
				repairs++
			}
		}
		if out.Iterations-repairs > s.Objective.Constraints.MaxIterations {
			t.Fatalf("seed %d: %d iterations (%d repair) > max %d", seed, out.Iterations, repairs, s.Objective.Constraints.MaxIterations)
		}
		got, err := state.NewStore(path).Read()
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if r := state.Validate(got); !r.Valid() {
			t.Fatalf("seed %d: invalid state after the run: %v", seed, r.Errors)
		}
		passes := exec.Command("sh", "-c", s.Objective.BaseCase.Legacy.Value)
		passes.Dir = dir
		basePassed := passes.Run() == nil
		completed := got.Control.Status == state.ControlCompleted
		if (out.Reason == engine.Completed) != completed || completed && !basePassed {
			t.Fatalf("seed %d: outcome %s, file status %s, base case passes %t", seed, out.Reason, got.Control.Status, basePassed)
		}
		if !completed && (got.Control.StopReason == nil || got.Control.Status != state.ControlStopped) {
			t.Fatalf("seed %d: halted without a stop reason: %+v", seed, got.Control)
		}
		for _, a := range got.Atoms {
			if a.Status == state.StatusInProgress {
				t.Fatalf("seed %d: %s left in progress", seed, a.ID)
			}
		}
		// Atoms may be left only when a bound was reached and aot found the
		// base case passing before stopping (planned or decomposed work the
		// checks turned out not to need).
		if out.Reason == engine.Completed && dag.Unresolved(got) != 0 && !strings.HasPrefix(out.Message, "the base case passed (checked ") {
			t.Fatalf("seed %d: completed with unresolved atoms: %s", seed, out.Message)
		}
	}
	t.Logf("stop reasons over %d runs: %v", runs, reasons)
	if reasons[engine.Completed] == 0 {
		t.Errorf("no run completed: the property test does not reach the completion path")
	}
}
