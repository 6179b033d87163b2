package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/state"
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

func benchProject(b *testing.B, n int) string {
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
				if err != nil || out.Reason != Completed {
					b.Fatalf("%+v %v", out, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "atoms/s")
		})
	}
}
