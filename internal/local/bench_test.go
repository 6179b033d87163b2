package local

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/prompt"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// layered returns n atoms in layers of width w; each atom depends on 0-3
// atoms of the previous two layers (the benchmark shape of SEMANTICS.md).
func layered(n, w int, seed uint64) []state.Atom {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]state.Atom, n)
	for i := range out {
		a := state.Atom{ID: fmt.Sprintf("A%d", i), Description: fmt.Sprintf("atom %d", i), Status: state.StatusPending, DependsOn: []string{}}
		layer := i / w
		if layer > 0 {
			lo := (layer - 2) * w
			if lo < 0 {
				lo = 0
			}
			hi := layer * w
			seen := map[int]bool{}
			for k := r.IntN(4); k > 0; k-- {
				d := lo + r.IntN(hi-lo)
				if !seen[d] {
					seen[d] = true
					a.DependsOn = append(a.DependsOn, fmt.Sprintf("A%d", d))
				}
			}
		}
		out[i] = a
	}
	return out
}

type instant struct{}

func (instant) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	return agent.Result{Success: true, Summary: "ok", Feasible: true, Passed: true}, nil
}

func benchProject(b testing.TB, n int) string {
	dir := b.TempDir()
	obj := state.Objective{Goal: "g", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c",
		BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "true"}}}
	s := state.New(obj, layered(n, 50, 7), "p")
	s.Objective.Constraints.MaxIterations = 10 * n
	s.Objective.Constraints.MaxParallelAgents = 8
	path := filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := state.NewStore(path).Create(s, false); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkEngineOverhead runs whole loops with an in-process instant agent:
// what the coordinator itself costs per atom completion.
func BenchmarkEngineOverhead(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				path := benchProject(b, n)
				b.StartTimer()
				start := time.Now()
				out, err := Run(context.Background(), Options{StateFile: path, Agent: instant{}})
				total += time.Since(start)
				if err != nil || out.Reason != engine.Completed {
					b.Fatalf("%+v %v", out, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "atoms/s")
		})
	}
}

// sleepy works for a time set per atom, to compare the engine's schedule
// with the ideal one.
type sleepy struct{ d map[string]time.Duration }

func (s sleepy) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	select {
	case <-time.After(s.d[t.Atom.ID]):
	case <-ctx.Done():
	}
	return agent.Result{Success: true, Summary: "ok"}, nil
}

// idealMakespan is max(critical path, total work / workers): no schedule
// can beat it.
func idealMakespan(atoms []state.Atom, d map[string]time.Duration, workers int) time.Duration {
	finish := map[string]time.Duration{}
	var total, critical time.Duration
	for _, a := range atoms { // layered atoms only depend on earlier ones
		var start time.Duration
		for _, dep := range a.DependsOn {
			start = max(start, finish[dep])
		}
		finish[a.ID] = start + d[a.ID]
		critical = max(critical, finish[a.ID])
		total += d[a.ID]
	}
	return max(critical, total/time.Duration(workers))
}

// BenchmarkMakespan reports the parallel makespan against the ideal, for a
// layered DAG of 200 atoms taking 20-60ms each, with 4 workers.
func BenchmarkMakespan(b *testing.B) {
	const n, workers = 200, 4
	atoms := layered(n, 8, 11)
	r := rand.New(rand.NewPCG(3, 3))
	d := map[string]time.Duration{}
	for _, a := range atoms {
		d[a.ID] = time.Duration(20+r.IntN(41)) * time.Millisecond
	}
	ideal := idealMakespan(atoms, d, workers)
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		obj := state.Objective{Goal: "g", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c",
			BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "true"}}}
		s := state.New(obj, append([]state.Atom(nil), atoms...), "p")
		s.Objective.Constraints.MaxIterations = 10 * n
		s.Objective.Constraints.MaxParallelAgents = workers
		path := filepath.Join(dir, ".claude", "aot-loop-state.md")
		if err := state.NewStore(path).Create(s, false); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		out, err := Run(context.Background(), Options{StateFile: path, Agent: sleepy{d}})
		total += time.Since(start)
		if err != nil || out.Reason != engine.Completed {
			b.Fatalf("%+v %v", out, err)
		}
	}
	got := total / time.Duration(b.N)
	b.ReportMetric(float64(got)/float64(ideal), "x-ideal")
	b.ReportMetric(ideal.Seconds(), "ideal-s")
}

// BenchmarkPromptSize reports the bytes of the task an agent receives for
// an atom in the middle of DAGs from 10 to 10,000 atoms (as JSON for the
// exec agent, and as the rendered worker prompt a CLI backend sends): only
// the atom, its dependencies' bindings and the objective, so it stays flat.
func BenchmarkPromptSize(b *testing.B) {
	for _, n := range []int{10, 1_000, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			t := middleTask(b, n)
			var size, text int
			for b.Loop() {
				data, _ := json.Marshal(t)
				p, err := prompt.Renderer{}.Render(t)
				if err != nil {
					b.Fatal(err)
				}
				size, text = len(data), len(p)
			}
			b.ReportMetric(float64(size), "task-bytes")
			b.ReportMetric(float64(text), "prompt-bytes")
		})
	}
}

// middleTask is the task of the middle atom of a layered DAG whose first
// half is resolved with bindings, as a Core starts it.
func middleTask(b testing.TB, n int) agent.Task {
	obj := state.Objective{Goal: "Build the thing", BackgroundIntent: "because", Deliverables: "the thing", DefinitionOfDone: "tests pass"}
	s := state.New(obj, layered(n, 5, 5), "p")
	for i := 0; i < n/2; i++ {
		s.Atoms[i].Status = state.StatusResolved
		s.Bindings = append(s.Bindings, state.Binding{AtomID: s.Atoms[i].ID, Summary: "did " + s.Atoms[i].ID + " carefully", Artifacts: []string{"f" + s.Atoms[i].ID + ".go"}})
	}
	mid := s.Atoms[n/2].ID
	h := &startOnly{}
	c := engine.NewCore(s, engine.CoreOptions{Settings: engine.Settings{MaxParallel: n}, Workdir: "/w", StateFile: "/w/.claude/aot-loop-state.md"}, h)
	c.Schedule(context.Background())
	for _, a := range h.started {
		if a.Atom == mid {
			return a.Task
		}
	}
	b.Fatalf("the Core did not start the middle atom %s (started %d attempts)", mid, len(h.started))
	return agent.Task{}
}

// startOnly is a Host that keeps the attempts a Core starts and does
// nothing else.
type startOnly struct{ started []engine.Attempt }

func (h *startOnly) Now() time.Time                                      { return time.Now() }
func (h *startOnly) Event(journal.Event)                                 {}
func (h *startOnly) Say(string)                                          {}
func (h *startOnly) Start(_ context.Context, a engine.Attempt)           { h.started = append(h.started, a) }
func (h *startOnly) Cancel(int)                                          {}
func (h *startOnly) Drain(context.Context)                               {}
func (h *startOnly) Checks(context.Context, bool) (verify.Report, error) { return verify.Report{}, nil }
func (h *startOnly) RunAgent(context.Context, agent.Task) (agent.Result, error, time.Duration) {
	return agent.Result{}, nil, 0
}
func (h *startOnly) Sync() error                       { return nil }
func (h *startOnly) Flush() error                      { return nil }
func (h *startOnly) ShowPause(*engine.PauseInfo) error { return nil }

// BenchmarkExecAgent is the same loop with a real process per task (the
// exec backend running a shell that answers at once): what process spawn
// adds to each atom.
func BenchmarkExecAgent(b *testing.B) {
	const n = 200
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		path := benchProject(b, n)
		b.StartTimer()
		start := time.Now()
		out, err := Run(context.Background(), Options{StateFile: path, Agent: &agent.Exec{Command: `echo '{"success": true, "summary": "ok"}'`}})
		total += time.Since(start)
		if err != nil || out.Reason != engine.Completed {
			b.Fatalf("%+v %v", out, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "atoms/s")
}
