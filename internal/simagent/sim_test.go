package simagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
)

// project is a small spec: A, B after A, C an OR choice of Ca (never works)
// and Cb, after A.
func project(t *testing.T) (dir string, cfg Config) {
	t.Helper()
	dir = t.TempDir()
	spec := &Spec{GoalAtom: "goal", Deliverables: []Deliverable{
		{Name: "A"},
		{Name: "B", DependsOn: []string{"A"}, Slow: true},
		{Name: "C", DependsOn: []string{"A"}, Alternatives: []Alternative{{Atom: "Ca"}, {Atom: "Cb", Works: true}}},
	}}
	if err := WriteSpec(filepath.Join(dir, "spec.json"), spec); err != nil {
		t.Fatal(err)
	}
	cfg = Defaults()
	cfg.SpecPath = filepath.Join(dir, "spec.json")
	cfg.Duration = 0
	cfg.CallsLog = filepath.Join(dir, "calls.log")
	cfg.PidsFile = filepath.Join(dir, "pids")
	cfg.Ledger = filepath.Join(dir, "ledger")
	cfg.UsageFile = filepath.Join(dir, "usage")
	return dir, cfg
}

type call struct {
	out     map[string]any
	raw     string
	stderr  string
	err     error
	killed  bool
	slept   []time.Duration
	started int
}

func run(t *testing.T, cfg Config, task agent.Task) call {
	t.Helper()
	in, _ := json.Marshal(task)
	var out, errb bytes.Buffer
	var c call
	env := Env{
		Stdin: bytes.NewReader(in), Stdout: &out, Stderr: &errb, Pid: 4242,
		Kill:            func() { c.killed = true },
		Sleep:           func(d time.Duration) { c.slept = append(c.slept, d) },
		StartBackground: func() (int, error) { c.started++; return 777, nil },
	}
	c.err = Run(cfg, env)
	c.raw, c.stderr = out.String(), errb.String()
	if c.err == nil {
		if err := json.Unmarshal(out.Bytes(), &c.out); err != nil {
			t.Fatalf("answer is not JSON: %q: %v", c.raw, err)
		}
		if _, err := agent.Decode(task.Role, bytes.TrimSpace(out.Bytes())); err != nil {
			t.Fatalf("aot would not accept the answer %q: %v", c.raw, err)
		}
	}
	return c
}

func worker(dir, atom string, attempt int) agent.Task {
	return agent.Task{Role: agent.Worker, Atom: agent.AtomRef{ID: atom}, Workdir: dir, Attempt: attempt}
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestDrawIsDeterministicAndSpread(t *testing.T) {
	if Draw(1, "a", "b") != Draw(1, "a", "b") {
		t.Fatal("same key, different draws")
	}
	if Draw(1, "a", "b") == Draw(2, "a", "b") || Draw(1, "ab", "") == Draw(1, "a", "b") {
		t.Fatal("different keys, same draw")
	}
	n, below := 20000, 0
	for i := range n {
		u := Draw(7, "k", string(rune('a'+i%26)), time.Duration(i).String())
		if u < 0 || u >= 1 {
			t.Fatalf("draw %v out of [0, 1)", u)
		}
		if u < 0.7 {
			below++
		}
	}
	if f := float64(below) / float64(n); f < 0.68 || f > 0.72 {
		t.Fatalf("P(u < 0.7) = %.3f", f)
	}
}

func TestParseFlagsPresetsAndOverrides(t *testing.T) {
	env := map[string]string{"AOT_SIM_CALLS": "/c", "AOT_SIM_PIDS": "/p", "AOT_USAGE_FILE": "/u"}
	c, err := ParseFlags([]string{"-spec", "s.json", "-profile", "flaky", "-hang", "0.05", "-pids", "/mine"}, func(k string) string { return env[k] }, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if c.Crash != 0.2 || c.Hang != 0.05 || c.P != 0.7 {
		t.Fatalf("flaky with -hang 0.05: crash %v hang %v p %v", c.Crash, c.Hang, c.P)
	}
	if c.CallsLog != "/c" || c.PidsFile != "/mine" || c.UsageFile != "/u" || c.Ledger != "" {
		t.Fatalf("paths: %+v", c)
	}
	for name, check := range map[string]func(Config) bool{
		"honest":     func(c Config) bool { return c.Lie == 0 && c.Crash == 0 && c.SlowFactor == 1 },
		"liar":       func(c Config) bool { return c.Lie == 1 },
		"regressing": func(c Config) bool { return c.Regress > 0 },
		"mixed":      func(c Config) bool { return c.SlowFactor == 10 },
	} {
		c, err := ParseFlags([]string{"-spec", "s", "-profile", name}, nil, os.Stderr)
		if err != nil || !check(c) {
			t.Errorf("profile %s: %+v, %v", name, c, err)
		}
	}
	for _, bad := range [][]string{
		{"-profile", "honest"},                        // no spec
		{"-spec", "s", "-profile", "nope"},            // unknown profile
		{"-spec", "s", "-p", "1.5"},                   // not a probability
		{"-spec", "s", "-crash", ".6", "-hang", ".6"}, // more than 1
		{"-spec", "s", "-planner", "smart"},
		{"-spec", "s", "extra"},
	} {
		if _, err := ParseFlags(bad, nil, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestHonestWorker(t *testing.T) {
	dir, cfg := project(t)
	cfg.P = 1
	// B needs A: it fails, truthfully, and writes nothing.
	c := run(t, cfg, worker(dir, "B", 1))
	if c.err != nil || c.out["success"] != false || !strings.Contains(c.out["summary"].(string), "needs A") {
		t.Fatalf("B before A: %v %v", c.out, c.err)
	}
	if Done(dir, "B") {
		t.Fatal("B written without A")
	}
	c = run(t, cfg, worker(dir, "A", 1))
	if c.out["success"] != true || !Done(dir, "A") {
		t.Fatalf("A: %v", c.out)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "out/A.txt")); string(got) != "A ok\n" {
		t.Fatalf("out/A.txt = %q", got)
	}
	c = run(t, cfg, worker(dir, "B", 2))
	if c.out["success"] != true || !Done(dir, "B") {
		t.Fatalf("B: %v", c.out)
	}
	// Usage: one model call per attempt, in the answer, the ledger and
	// AOT_USAGE_FILE; one calls-log and one pids line per call.
	u := c.out["usage"].(map[string]any)
	if u["input_tokens"] != float64(cfg.TokensIn) || u["output_tokens"] != float64(cfg.TokensOut) || u["cost_usd"].(float64) <= 0 {
		t.Fatalf("usage %v", u)
	}
	for _, f := range []string{cfg.CallsLog, cfg.PidsFile, cfg.Ledger, cfg.UsageFile} {
		if n := len(lines(t, f)); n != 3 {
			t.Errorf("%s: %d lines, want 3", filepath.Base(f), n)
		}
	}
	if l := lines(t, cfg.PidsFile)[0]; !strings.HasPrefix(l, "4242 agent worker B 1") {
		t.Errorf("pids line %q", l)
	}

	// P = 0: an honest failure, nothing written.
	cfg.P = 0
	os.RemoveAll(filepath.Join(dir, "out"))
	c = run(t, cfg, worker(dir, "A", 3))
	if c.out["success"] != false || Done(dir, "A") {
		t.Fatalf("P=0: %v", c.out)
	}
}

func TestORChoice(t *testing.T) {
	dir, cfg := project(t)
	cfg.P = 1
	run(t, cfg, worker(dir, "A", 1))
	for attempt := 1; attempt <= 5; attempt++ {
		if c := run(t, cfg, worker(dir, "Ca", attempt)); c.out["success"] != false {
			t.Fatalf("Ca attempt %d: %v", attempt, c.out)
		}
	}
	if c := run(t, cfg, worker(dir, "Cb", 1)); c.out["success"] != true || !Done(dir, "C") {
		t.Fatalf("Cb: %v", c.out)
	}
}

func TestLiarClaimsSuccess(t *testing.T) {
	dir, cfg := project(t)
	cfg.Lie, cfg.P = 1, 0
	for attempt := 1; attempt <= 6; attempt++ {
		c := run(t, cfg, worker(dir, "A", attempt))
		if c.out["success"] != true || Done(dir, "A") {
			t.Fatalf("liar attempt %d: %v, done %v", attempt, c.out, Done(dir, "A"))
		}
	}
}

func TestCrashAndHang(t *testing.T) {
	dir, cfg := project(t)
	cfg.Crash = 1
	c := run(t, cfg, worker(dir, "A", 1))
	if !errors.Is(c.err, ErrCrashed) || !c.killed {
		t.Fatalf("crash: %v, killed %v", c.err, c.killed)
	}
	if c.raw == "" || json.Valid([]byte(c.raw)) {
		t.Fatalf("a crash prints half an answer, got %q", c.raw)
	}
	cfg.Crash, cfg.Hang, cfg.HangFor = 0, 1, time.Hour
	c = run(t, cfg, worker(dir, "A", 1))
	if !errors.Is(c.err, ErrHung) || len(c.slept) != 1 || c.slept[0] != time.Hour || c.raw != "" {
		t.Fatalf("hang: %v, slept %v, out %q", c.err, c.slept, c.raw)
	}
	// Both calls are logged, with their fate, before anything else happens.
	l := lines(t, cfg.CallsLog)
	if len(l) != 2 || !strings.Contains(l[0], `"fate":"crash"`) || !strings.Contains(l[1], `"fate":"hang"`) {
		t.Fatalf("calls log %q", l)
	}
}

func TestBackgroundChild(t *testing.T) {
	dir, cfg := project(t)
	cfg.Background = 1
	c := run(t, cfg, worker(dir, "A", 1))
	if c.started != 1 {
		t.Fatalf("started %d background children", c.started)
	}
	if l := lines(t, cfg.PidsFile); len(l) != 2 || l[1] != "777 background" {
		t.Fatalf("pids %q", l)
	}
}

func TestRegressBreaksAnotherDeliverable(t *testing.T) {
	dir, cfg := project(t)
	cfg.P, cfg.Regress = 1, 1
	run(t, cfg, worker(dir, "A", 1)) // nothing else to break yet
	if !Done(dir, "A") {
		t.Fatal("A not done")
	}
	c := run(t, cfg, worker(dir, "B", 1))
	if c.out["success"] != true || !Done(dir, "B") || Done(dir, "A") {
		t.Fatalf("B: %v; A done %v (want broken)", c.out, Done(dir, "A"))
	}
}

func TestSlowDeliverables(t *testing.T) {
	dir, cfg := project(t)
	cfg.P, cfg.Duration, cfg.SlowFactor = 1, 10*time.Millisecond, 10
	fast := run(t, cfg, worker(dir, "A", 1)).slept
	slow := run(t, cfg, worker(dir, "B", 1)).slept
	if len(fast) != 1 || len(slow) != 1 || fast[0] < 5*time.Millisecond || fast[0] > 15*time.Millisecond || slow[0] < 50*time.Millisecond {
		t.Fatalf("fast %v slow %v", fast, slow)
	}
}

func TestWholeGoal(t *testing.T) {
	dir, cfg := project(t)
	cfg.P = 1
	c := run(t, cfg, worker(dir, "goal", 1))
	if c.out["success"] != true {
		t.Fatalf("whole goal: %v", c.out)
	}
	for _, n := range []string{"A", "B", "C"} {
		if !Done(dir, n) {
			t.Errorf("%s not done", n)
		}
	}
	// 1 planning call, A, B, Ca (fails), Cb.
	if n := len(lines(t, cfg.Ledger)); n != 5 {
		t.Errorf("%d model calls, want 5", n)
	}
	// Nothing left: it says done at once.
	if c := run(t, cfg, worker(dir, "goal", 2)); c.out["success"] != true {
		t.Fatalf("second call: %v", c.out)
	}

	// P = 0, honest: says not done; each deliverable drawn per call.
	dir2, cfg2 := project(t)
	cfg2.P = 0
	if c := run(t, cfg2, worker(dir2, "goal", 1)); c.out["success"] != false {
		t.Fatalf("P=0 whole goal: %v", c.out)
	}
	// A crash stops halfway: of A, B, C it does A and B, then dies.
	dir3, cfg3 := project(t)
	cfg3.P, cfg3.Crash = 1, 1
	c = run(t, cfg3, worker(dir3, "goal", 1))
	if !c.killed || !Done(dir3, "A") || !Done(dir3, "B") || Done(dir3, "C") {
		t.Fatalf("crash halfway: killed %v, A %v B %v C %v", c.killed, Done(dir3, "A"), Done(dir3, "B"), Done(dir3, "C"))
	}
}

func TestDeterministicAcrossRuns(t *testing.T) {
	outcomes := func() string {
		dir, cfg := project(t)
		cfg.Seed, cfg.Crash, cfg.Hang = 42, 0, 0
		var b strings.Builder
		for attempt := 1; attempt <= 8; attempt++ {
			c := run(t, cfg, worker(dir, "A", attempt))
			b.WriteString(c.out["summary"].(string) + "|")
			os.RemoveAll(filepath.Join(dir, "out"))
		}
		return b.String()
	}
	if a, b := outcomes(), outcomes(); a != b {
		t.Fatalf("two runs differ:\n%s\n%s", a, b)
	}
}

func TestRolesAndPlanner(t *testing.T) {
	dir, cfg := project(t)
	c := run(t, cfg, agent.Task{Role: agent.Probe, Atom: agent.AtomRef{ID: "A"}, Workdir: dir, Attempt: 2})
	if c.out["feasible"] != true {
		t.Fatalf("probe: %v", c.out)
	}
	c = run(t, cfg, agent.Task{Role: agent.Probe, Atom: agent.AtomRef{ID: "Ca"}, Workdir: dir, Attempt: 2})
	if c.out["feasible"] != false {
		t.Fatalf("probe of an approach that never works: %v", c.out)
	}
	c = run(t, cfg, agent.Task{Role: agent.Judge, Atom: agent.AtomRef{ID: "A"}, Workdir: dir})
	if c.out["passed"] != true {
		t.Fatalf("judge: %v", c.out)
	}
	base := agent.Task{Role: agent.Planner, Atom: agent.AtomRef{ID: "base_case"}, Workdir: dir, Attempt: 7, Failures: []string{"A: failed"}}
	c = run(t, cfg, base)
	if !strings.Contains(c.raw, `"atoms":[]`) {
		t.Fatalf("empty planner: %q", c.raw)
	}
	cfg.Planner = "fix"
	cfg.P = 1
	run(t, cfg, worker(dir, "A", 1))
	c = run(t, cfg, base)
	var ans struct{ Atoms []agent.PlannedAtom }
	_ = json.Unmarshal([]byte(c.raw), &ans)
	if len(ans.Atoms) != 2 || ans.Atoms[0].ID != "B-fix-7" || ans.Atoms[1].ID != "C-fix-7" {
		t.Fatalf("fix planner: %+v", ans.Atoms)
	}
	// A fix atom does its deliverable's work.
	if c := run(t, cfg, worker(dir, "C-fix-7", 1)); c.out["success"] != true || !Done(dir, "C") {
		t.Fatalf("fix atom: %v", c.out)
	}
}

func TestSpecOrderAndValidation(t *testing.T) {
	s := &Spec{Deliverables: []Deliverable{{Name: "B", DependsOn: []string{"A"}}, {Name: "A"}}}
	o, err := s.Order()
	if err != nil || o[0].Name != "A" || o[1].Name != "B" {
		t.Fatalf("order %v %v", o, err)
	}
	for _, bad := range []*Spec{
		{Deliverables: []Deliverable{{Name: "A", DependsOn: []string{"B"}}, {Name: "B", DependsOn: []string{"A"}}}},
		{Deliverables: []Deliverable{{Name: "A"}, {Name: "A"}}},
		{Deliverables: []Deliverable{{Name: "A", DependsOn: []string{"Z"}}}},
		{Deliverables: []Deliverable{{Name: "it's"}}},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v: valid", bad)
		}
	}
	if got := CheckCommand("D01"); got != "grep -qx 'D01 ok' out/D01.txt" {
		t.Fatal(got)
	}
}
