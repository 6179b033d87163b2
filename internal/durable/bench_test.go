package durable

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// The Temporal path's cost per atom against the local engine on the same
// work graph: 24 independent atoms whose agent writes one file (so every
// atom is a worktree, a commit and a merge on both paths), through a dev
// server with 1, 2 and 4 workers, beside engine.Run with git worktrees.
//
//	AOT_REQUIRE_TEMPORAL=1 go test -run '^$' -bench Loop -benchtime 1x ./internal/durable/

const benchAtoms = 24

func benchState() *state.State {
	var atoms []state.Atom
	check := "true"
	for i := range benchAtoms {
		id := fmt.Sprintf("A%02d", i)
		atoms = append(atoms, state.Atom{ID: id, Description: "write " + id + ".txt"})
		check += " && test -f " + id + ".txt"
	}
	s := state.New(state.Objective{Goal: "files", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c",
		BaseCase:    &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: check}},
		Constraints: state.Constraints{MaxIterations: 100, MaxParallelAgents: 4, MaxStallCount: 5}}, atoms, "files")
	return s
}

const benchAgent = `echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "ok"}'`

func BenchmarkLoopLocalEngine(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		repo, _ := newRemote(b, map[string]string{})
		dir := filepath.Join(b.TempDir(), "work")
		gitT(b, filepath.Dir(dir), "clone", "-q", repo, dir)
		sf := filepath.Join(dir, ".claude", "aot-loop-state.md")
		if err := state.NewStore(sf).Create(benchState(), false); err != nil {
			b.Fatal(err)
		}
		gitT(b, dir, "add", "-A")
		gitT(b, dir, "commit", "-q", "-m", "loop")
		ag, err := backend.New(backend.Config{Spec: backend.Spec{Agent: "exec", Command: benchAgent}}, backend.Env{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		out, err := engine.Run(context.Background(), engine.Options{StateFile: sf, Agent: ag, MaxParallel: 4, Isolation: engine.IsolationWorktree})
		if err != nil || out.Reason != engine.Completed {
			b.Fatalf("%+v %v", out, err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds())/benchAtoms, "ms/atom")
		b.ReportMetric(benchAtoms/time.Since(start).Seconds(), "atoms/s")
	}
}

func BenchmarkLoopTemporal(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			addr := devServer(b)
			for b.Loop() {
				b.StopTimer()
				queue := fmt.Sprintf("bench-%d-%d", workers, time.Now().UnixNano())
				ctx, cancel := context.WithCancel(context.Background())
				for w := range workers {
					c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger(), DataConverter: DataConverter()})
					if err != nil {
						b.Fatal(err)
					}
					go RunWorker(ctx, WorkerOptions{Client: c, TaskQueue: queue, CacheDir: b.TempDir(), Identity: fmt.Sprint("w", w),
						NewAgent: func(ch AgentChoice, role agent.Role, dirs AgentDirs) (agent.Agent, error) {
							return backend.New(backend.Config{Spec: backend.Spec{Agent: "exec", Command: ch.Command}}, backend.Env{})
						}, MaxActivities: 4, Grace: time.Second})
				}
				repo, seed := newRemote(b, map[string]string{})
				c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger(), DataConverter: DataConverter()})
				if err != nil {
					b.Fatal(err)
				}
				id := "bench-" + queue
				gitT(b, repo, "branch", "integration/"+id, seed)
				s := benchState()
				s.Control.Status = state.ControlRunning
				in := LoopInput{State: state.Marshal(s), Repo: repo, Base: "integration/" + id, BaseCommit: seed,
					Agent: AgentChoice{Agent: "exec", Command: benchAgent}, MaxParallel: 4 * workers, AgentTimeout: time.Minute}
				b.StartTimer()
				start := time.Now()
				run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue}, WorkflowName, in)
				if err != nil {
					b.Fatal(err)
				}
				var out Outcome
				if err := run.Get(context.Background(), &out); err != nil || out.Reason != string(engine.Completed) {
					b.Fatalf("%+v %v", out, err)
				}
				b.ReportMetric(float64(time.Since(start).Milliseconds())/benchAtoms, "ms/atom")
				b.ReportMetric(benchAtoms/time.Since(start).Seconds(), "atoms/s")
				cancel()
				c.Close()
			}
		})
	}
}
