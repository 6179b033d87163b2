//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/simagent"
)

// TestOutcomeShort is the short form of the benchmark: 3 seeds, 4 and 8
// deliverables, every profile, aot at 1 and 3 slots against both baselines.
// It asserts the targets: no false completion by aot; aot completes at least
// 95% per profile and never less than the check-gated baseline (less one
// seed of slack); at most 3 agent calls per deliverable (median); no process
// left behind.
func TestOutcomeShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	aot, sim, err := Binaries(filepath.Join(dir, "bin"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := Config{
		AOT: aot, Sim: sim, Work: filepath.Join(dir, "work"),
		Seeds: []uint64{1, 2, 3}, Sizes: []int{4, 8}, Profiles: simagent.ProfileNames(), Slots: []int{1, 3},
		Jobs: 4, AgentTimeout: 2 * time.Second, RunTimeout: 90 * time.Second, CallFactor: 3,
		SimFlags:  []string{"-background", "0.1", "-planner", "empty"},
		Isolation: "shared",
	}
	c.Revision = revision(aot)
	start := time.Now()
	results := Run(ctx, c)
	var report bytes.Buffer
	Report(&report, c, results, "go test -run TestOutcomeShort ./bench/outcome/", time.Since(start))
	t.Logf("\n%s", report.String())
	if ctx.Err() != nil {
		t.Fatalf("the short form did not finish in time: %v", ctx.Err())
	}
	for _, r := range results {
		if r.Err != "" {
			t.Errorf("harness: %s N=%d seed %d %s: %s", r.Profile, r.Size, r.Seed, r.Runner, r.Err)
		}
	}
	const slack = 1 // seeds
	rows := Aggregate(c, results)
	base := map[string]Row{}
	for _, r := range rows {
		if r.Runner == RunnerChecksPass {
			base[fmt.Sprintf("%s/%d", r.Profile, r.Size)] = r
		}
	}
	type total struct{ complete, runs int }
	perProfile := map[string]*total{}
	for _, r := range rows {
		if !strings.HasPrefix(r.Runner, "aot") {
			continue
		}
		at := fmt.Sprintf("%s, N=%d, %s", r.Profile, r.Size, r.Runner)
		if r.False > 0 {
			t.Errorf("%s: %d false completions (exit 0 with failing checks), want 0", at, r.False)
		}
		b := base[fmt.Sprintf("%s/%d", r.Profile, r.Size)]
		if r.Complete < b.Complete-slack {
			t.Errorf("%s: %d/%d completed, the check-gated baseline %d/%d", at, r.Complete, r.Runs, b.Complete, b.Runs)
		}
		if r.CallsPerDeliverable() > 3 {
			t.Errorf("%s: %.2f agent calls per deliverable (median), want at most 3", at, r.CallsPerDeliverable())
		}
		if r.Left > 0 {
			t.Errorf("%s: %d processes left after aot run returned, want 0", at, r.Left)
		}
		key := r.Profile + ", " + r.Runner
		if perProfile[key] == nil {
			perProfile[key] = &total{}
		}
		perProfile[key].complete += r.Complete
		perProfile[key].runs += r.Runs
	}
	for _, p := range c.Profiles {
		for _, s := range c.Slots {
			key := p + ", " + aotRunner(s)
			tot := perProfile[key]
			if tot == nil || tot.runs == 0 {
				t.Errorf("%s: no runs", key)
				continue
			}
			if rate := float64(tot.complete) / float64(tot.runs); rate < 0.95 {
				t.Errorf("%s: %d/%d completed (%.0f%%), want at least 95%%", key, tot.complete, tot.runs, 100*rate)
			}
		}
	}
}

func TestProjectShape(t *testing.T) {
	for _, n := range []int{4, 8, 16, 32} {
		s := Project(n)
		if len(s.Deliverables) != n {
			t.Fatalf("N=%d: %d deliverables", n, len(s.Deliverables))
		}
		if _, err := s.Order(); err != nil {
			t.Fatalf("N=%d: %v", n, err)
		}
		or, deps, slow := 0, 0, 0
		for _, d := range s.Deliverables {
			if len(d.Alternatives) > 0 {
				or++
				if d.Alternatives[0].Works || !d.Alternatives[1].Works {
					t.Errorf("N=%d: the first approach must fail and the second work: %+v", n, d.Alternatives)
				}
			}
			if len(d.DependsOn) > 0 {
				deps++
			}
			if d.Slow {
				slow++
			}
		}
		if or != 1 || deps < n/2 || slow < 1 {
			t.Errorf("N=%d: %d OR choices, %d with dependencies, %d slow", n, or, deps, slow)
		}
	}
}

func TestAggregateAndTargets(t *testing.T) {
	c := Config{Profiles: []string{"honest"}, Sizes: []int{4}, Seeds: []uint64{1, 2, 3}, Slots: []int{1}}
	var rs []Result
	for s := uint64(1); s <= 3; s++ {
		rs = append(rs,
			Result{Profile: "honest", Size: 4, Seed: s, Runner: aotRunner(1), Complete: s != 2, Claimed: true, Calls: int(4 * s), Reason: "completed"},
			Result{Profile: "honest", Size: 4, Seed: s, Runner: RunnerChecksPass, Complete: true, Claimed: true, Calls: 2, Reason: "checks passed after 2 calls"},
			Result{Profile: "honest", Size: 4, Seed: s, Runner: RunnerSaidDone, Claimed: true, Calls: 1, Reason: "said done after 1 calls"},
		)
	}
	rows := Aggregate(c, rs)
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	a := rows[0]
	if a.Runner != aotRunner(1) || a.Runs != 3 || a.Complete != 2 || a.False != 1 || a.Calls != 8 || a.CallsPerDeliverable() != 2 {
		t.Fatalf("aot row %+v", a)
	}
	met := map[string]bool{}
	for _, tg := range Targets(rows, 0) {
		met[tg.Name] = tg.Met
	}
	if met["aot: 0 false completions"] || !met["aot: at most 3 agent calls per deliverable (median)"] || !met["aot: 0 processes left"] {
		t.Fatalf("targets %v", met)
	}
	var b bytes.Buffer
	Markdown(&b, rows)
	if !strings.Contains(b.String(), "| honest | 4 | aot run, 1 slot | 2/3 (67%) | 1 | 8.0 | 2.00 |") {
		t.Fatalf("table:\n%s", b.String())
	}
	if median([]float64{3, 1, 2, 10}) != 2.5 {
		t.Fatal("median")
	}
}

// A leftover is this run's process only: a reused pid of another run's
// sleep (other working directory) is not counted.
func TestLeftoversAreThisRunsOnly(t *testing.T) {
	mine, other := t.TempDir(), t.TempDir()
	start := func(dir string) *exec.Cmd {
		cmd := exec.Command("sleep", "1000")
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	a, b := start(mine), start(other)
	pids := filepath.Join(t.TempDir(), "pids")
	content := fmt.Sprintf("%d background\n%d background\n", a.Process.Pid, b.Process.Pid)
	if err := os.WriteFile(pids, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got := leftovers(pids, "simagent", "/no/spec.json", mine)
	if len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprint(a.Process.Pid)) {
		t.Fatalf("leftovers = %q, want only pid %d", got, a.Process.Pid)
	}
}
