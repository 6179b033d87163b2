package durable

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/local"
	"github.com/aot-loop/aot/internal/state"
)

// The Temporal path's cost per atom against the local engine on the same
// work graph: independent atoms whose agent writes one file (so every atom
// is a worktree, a commit and a merge on both paths), through a dev server
// with in-process workers, beside local.Run with git worktrees.
//
//	AOT_REQUIRE_TEMPORAL=1 go test -run '^$' -bench 'Loop(LocalEngine|Temporal)$' -benchtime 1x ./internal/durable/
//	AOT_REQUIRE_TEMPORAL=1 go test -run '^$' -bench LoopAgainstLocal -benchtime 3x -timeout 30m ./internal/durable/

const benchAtoms = 24

func benchState(n, parallel int) *state.State {
	var atoms []state.Atom
	check := "true"
	for i := range n {
		id := fmt.Sprintf("A%03d", i)
		atoms = append(atoms, state.Atom{ID: id, Description: "write " + id + ".txt"})
		check += " && test -f " + id + ".txt"
	}
	s := state.New(state.Objective{Goal: "files", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c",
		BaseCase:    &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: check}},
		Constraints: state.Constraints{MaxIterations: 100, MaxParallelAgents: parallel, MaxStallCount: 5}}, atoms, "files")
	return s
}

const benchAgent = `echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "ok"}'`

// localLoop runs n atoms with the local engine, parallel agents at once,
// and returns how long the loop took.
func localLoop(b *testing.B, n, parallel int) time.Duration {
	b.Helper()
	repo, _ := newRemote(b, map[string]string{})
	dir := filepath.Join(b.TempDir(), "work")
	gitT(b, filepath.Dir(dir), "clone", "-q", repo, dir)
	sf := filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := state.NewStore(sf).Create(benchState(n, parallel), false); err != nil {
		b.Fatal(err)
	}
	gitT(b, dir, "add", "-A")
	gitT(b, dir, "commit", "-q", "-m", "loop")
	ag, err := backend.New(backend.Config{Spec: backend.Spec{Agent: "exec", Command: benchAgent}}, backend.Env{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	out, err := local.Run(context.Background(), local.Options{Settings: engine.Settings{MaxParallel: parallel, Isolation: engine.IsolationWorktree}, StateFile: sf, Agent: ag})
	if err != nil || out.Reason != engine.Completed {
		b.Fatalf("%+v %v", out, err)
	}
	return time.Since(start)
}

// benchWorkers starts in-process workers polling queue until the
// benchmark ends, each with a cache folder of its own or (shared) all with
// one, as two aot worker processes of one user on one machine have.
func benchWorkers(b *testing.B, addr, queue string, workers int, shared bool) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var clients []client.Client
	done := make(chan error, workers)
	b.Cleanup(func() {
		cancel()
		for range clients {
			<-done
		}
		for _, c := range clients {
			c.Close()
		}
	})
	cache := b.TempDir()
	for w := range workers {
		if !shared {
			cache = b.TempDir()
		}
		c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger(), DataConverter: DataConverter()})
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, c)
		go func() {
			done <- RunWorker(ctx, WorkerOptions{Client: c, TaskQueue: queue, CacheDir: cache, Identity: fmt.Sprint("w", w), MaxActivities: benchMaxActivities(b),
				NewAgent: func(ch AgentChoice, role agent.Role, dirs AgentDirs) (agent.Agent, error) {
					return backend.New(backend.Config{Spec: backend.Spec{Agent: "exec", Command: ch.Command}}, backend.Env{})
				}, Grace: time.Second})
		}()
	}
}

// benchMaxActivities is each benchmark worker's --max-activities:
// $AOT_BENCH_MAX_ACTIVITIES, or aot worker's default.
func benchMaxActivities(b *testing.B) int {
	v := os.Getenv("AOT_BENCH_MAX_ACTIVITIES")
	if v == "" {
		return DefaultMaxActivities
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("AOT_BENCH_MAX_ACTIVITIES=%q: want a count of at least 1", v)
	}
	return n
}

// temporalLoop runs n atoms as a loop workflow on queue, parallel agents
// at once, and returns how long the loop took.
func temporalLoop(b *testing.B, c client.Client, queue string, n, parallel int) time.Duration {
	b.Helper()
	repo, seed := newRemote(b, map[string]string{})
	id := fmt.Sprintf("bench-%s-%d", queue, time.Now().UnixNano())
	gitT(b, repo, "branch", "integration/"+id, seed)
	s := benchState(n, parallel)
	s.Control.Status = state.ControlRunning
	in := LoopInput{State: state.Marshal(s), Repo: repo, Base: "integration/" + id, BaseCommit: seed,
		Agent: AgentChoice{Agent: "exec", Command: benchAgent}, Settings: engine.Settings{MaxParallel: parallel, AgentTimeout: time.Minute}}
	start := time.Now()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue}, WorkflowName, in)
	if err != nil {
		b.Fatal(err)
	}
	var out Outcome
	if err := run.Get(context.Background(), &out); err != nil || out.Reason != string(engine.Completed) {
		files := strings.Fields(gitT(b, repo, "ls-tree", "--name-only", in.Base))
		b.Fatalf("%+v %v\nthe integration branch holds %d files, at:\n%s", out, err, len(files), gitT(b, repo, "log", "-5", "--format=%H %s", in.Base))
	}
	took := time.Since(start)
	if n >= 100 {
		b.Log(historyTimes(b, c, id))
	}
	return took
}

func perAtom(d time.Duration, n int) float64 { return float64(d.Milliseconds()) / float64(n) }

func BenchmarkLoopLocalEngine(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		d := localLoop(b, benchAtoms, 4)
		b.ReportMetric(perAtom(d, benchAtoms), "ms/atom")
		b.ReportMetric(benchAtoms/d.Seconds(), "atoms/s")
	}
}

func BenchmarkLoopTemporal(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			addr := devServer(b)
			queue := fmt.Sprintf("bench-%d-%d", workers, time.Now().UnixNano())
			benchWorkers(b, addr, queue, workers, false)
			c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger(), DataConverter: DataConverter()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for b.Loop() {
				b.StopTimer()
				d := temporalLoop(b, c, queue, benchAtoms, 4*workers)
				b.ReportMetric(perAtom(d, benchAtoms), "ms/atom")
				b.ReportMetric(benchAtoms/d.Seconds(), "atoms/s")
			}
		})
	}
}

// BenchmarkLoopAgainstLocal is issue #23's throughput target: 200
// independent atoms, 4 agents at once, on two workers against the local
// engine, each round both loops one after the other in the same process.
// ratio is the Temporal loop's time over the local one's. The workers have
// a cache folder each (as on two machines: cache=own), or share one (as
// two aot worker processes of one user on one machine, whose default
// cache folder is the same: cache=shared).
func BenchmarkLoopAgainstLocal(b *testing.B) {
	addr := devServer(b)
	for _, cache := range []string{"own", "shared"} {
		b.Run("cache="+cache, func(b *testing.B) { loopAgainstLocal(b, addr, cache == "shared") })
	}
}

func loopAgainstLocal(b *testing.B, addr string, shared bool) {
	const atoms, parallel = 200, 4
	queue := fmt.Sprintf("bench-vs-%d", time.Now().UnixNano())
	benchWorkers(b, addr, queue, 2, shared)
	c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger(), DataConverter: DataConverter()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var local, durable, localCPU, durableCPU time.Duration
	rounds := 0
	for b.Loop() {
		b.StopTimer()
		s0, c0, v0 := cpuSpent(addr)
		l := localLoop(b, atoms, parallel)
		s1, c1, v1 := cpuSpent(addr)
		d := temporalLoop(b, c, queue, atoms, parallel)
		s2, c2, v2 := cpuSpent(addr)
		// The local loop's CPU leaves the idle server's out; the Temporal
		// loop's counts the server's.
		lc, dc := s1-s0+c1-c0, s2-s1+c2-c1+v2-v1
		b.Logf("round %d: local %s, temporal %s, ratio %.2fx; CPU: local %s (this process %s, git and agents %s), temporal %s (this process %s, git and agents %s, the server %s; idle %s during the local loop)",
			rounds+1, l.Round(time.Millisecond), d.Round(time.Millisecond), d.Seconds()/l.Seconds(),
			lc.Round(10*time.Millisecond), (s1 - s0).Round(10*time.Millisecond), (c1 - c0).Round(10*time.Millisecond),
			dc.Round(10*time.Millisecond), (s2 - s1).Round(10*time.Millisecond), (c2 - c1).Round(10*time.Millisecond), (v2 - v1).Round(10*time.Millisecond), (v1 - v0).Round(10*time.Millisecond))
		local, durable, rounds = local+l, durable+d, rounds+1
		localCPU, durableCPU = localCPU+lc, durableCPU+dc
		b.StartTimer()
	}
	b.ReportMetric(perAtom(local/time.Duration(rounds), atoms), "local-ms/atom")
	b.ReportMetric(perAtom(durable/time.Duration(rounds), atoms), "temporal-ms/atom")
	b.ReportMetric(durable.Seconds()/local.Seconds(), "ratio")
	if localCPU > 0 {
		b.ReportMetric(durableCPU.Seconds()/localCPU.Seconds(), "cpu-ratio")
	}
}

// historyTimes summarizes where a loop's time went, from its workflow's
// history: the attempt activities (waiting for a worker, running), the
// merges, the workflow tasks, and the gap from an attempt's end to the
// next attempt's scheduling.
func historyTimes(b *testing.B, c client.Client, id string) string {
	b.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	type span struct{ sched, start, end time.Time }
	acts, kinds := map[int64]*span{}, map[int64]string{}
	var wft []*span
	var cur *span
	var waits, runs, merges, reacts []time.Duration
	var ended time.Time // the last attempt's end not yet followed by a scheduling
	events := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		at := ev.GetEventTime().AsTime()
		events++
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			cur = &span{sched: at}
			wft = append(wft, cur)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if cur != nil {
				cur.start = at
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if cur != nil {
				cur.end = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			acts[ev.GetEventId()], kinds[ev.GetEventId()] = &span{sched: at}, a.GetActivityType().GetName()
			if a.GetActivityType().GetName() == AttemptActivity && !ended.IsZero() {
				reacts, ended = append(reacts, at.Sub(ended)), time.Time{}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if s := acts[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; s != nil {
				s.start = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			id := ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
			s := acts[id]
			if s == nil {
				continue
			}
			switch kinds[id] {
			case AttemptActivity:
				waits, runs = append(waits, s.start.Sub(s.sched)), append(runs, at.Sub(s.start))
				if ended.IsZero() {
					ended = at
				}
			case MergeBatchActivity:
				merges = append(merges, at.Sub(s.start))
			}
		}
	}
	var wWait, wRun []time.Duration
	for _, s := range wft {
		if !s.start.IsZero() && !s.end.IsZero() {
			wWait, wRun = append(wWait, s.start.Sub(s.sched)), append(wRun, s.end.Sub(s.start))
		}
	}
	return fmt.Sprintf("attempts %d: wait %s, run %s; next attempt scheduled %s after an attempt's end; merges %d, run %s; workflow tasks %d: wait %s, run %s; %d events",
		len(runs), mean(waits), mean(runs), mean(reacts), len(merges), mean(merges), len(wRun), mean(wWait), mean(wRun), events)
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return (sum / time.Duration(len(ds))).Round(time.Millisecond)
}
