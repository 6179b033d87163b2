//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/simagent"
)

// Runners compared in one run.
const (
	RunnerSaidDone   = "prompt until said done"   // baseline (a)
	RunnerChecksPass = "prompt until checks pass" // baseline (b)
)

// aotRunner names aot run at a number of slots.
func aotRunner(slots int) string { return fmt.Sprintf("aot run, %d slot%s", slots, plural(slots)) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Config is one benchmark run.
type Config struct {
	AOT, Sim     string // binaries
	Work         string // where the projects go
	Seeds        []uint64
	Sizes        []int
	Profiles     []string
	Slots        []int         // aot run --max-parallel, one runner each
	Jobs         int           // projects run at once
	AgentTimeout time.Duration // aot run --agent-timeout, and the baselines' per-call timeout
	RunTimeout   time.Duration // a whole aot run or baseline loop, killed after it
	CallFactor   int           // baselines stop after CallFactor x deliverables calls
	SimFlags     []string      // passed to every sim call (after the profile's)
	Keep         bool          // keep the projects (journals) after the run
	// Isolation is aot run --isolation ("" passes none). The deliverables
	// are separate files, so workers may share the project root.
	Isolation string
	Revision  string // which aot, taken when the binaries were built
}

// Result is one runner on one project.
type Result struct {
	Profile  string
	Size     int
	Seed     uint64
	Runner   string
	Complete bool   // every check passes at the end, checked by the harness
	Claimed  bool   // the runner said it succeeded (aot: exit code 0)
	Reason   string // aot's stop reason, or the baseline's
	Exit     int    // aot's exit code
	Calls    int    // agent calls (calls log lines)
	Tokens   int64  // tokens the sim spent (its ledger)
	Reported int64  // tokens the runner counted
	Wall     time.Duration
	Left     int      // sim processes alive after the runner returned
	LeftWhat []string // their lines in the pids file ("PID agent ROLE ATOM ATTEMPT", "PID background")
	Dir      string
	Err      string // the harness's own trouble
}

// False is a false completion: claimed, but the checks fail.
func (r Result) False() bool { return r.Claimed && !r.Complete }

// Project is the spec of an n-deliverable task: chains of three (D01 -> D02
// -> D03, D05 -> D06 -> D07, ...), every eighth deliverable joins two chains,
// and the last one is an OR choice of two approaches, the first of which
// always fails. Every fourth deliverable is slow (with the mixed profile).
func Project(n int) *simagent.Spec {
	s := &simagent.Spec{GoalAtom: simagent.DefaultGoalAtom}
	name := func(i int) string { return fmt.Sprintf("D%02d", i) }
	for i := 1; i <= n; i++ {
		d := simagent.Deliverable{Name: name(i), Slow: i%4 == 0}
		switch {
		case i == n:
			d.DependsOn = []string{name(1)}
			d.Alternatives = []simagent.Alternative{{Atom: name(i) + "a"}, {Atom: name(i) + "b", Works: true}}
		case i%4 == 2 || i%4 == 3:
			d.DependsOn = []string{name(i - 1)}
		case i%8 == 0:
			d.DependsOn = []string{name(i - 1), name(i - 5)}
		}
		s.Deliverables = append(s.Deliverables, d)
	}
	return s
}

// goal is the objective's text, also the whole-goal prompt of the baselines.
func goal(s *simagent.Spec) agent.Objective {
	var files []string
	for _, d := range s.Deliverables {
		files = append(files, simagent.File(d.Name))
	}
	return agent.Objective{
		Goal:             fmt.Sprintf("Produce the %d deliverables %s, each holding its line 'NAME ok'", len(files), strings.Join(files, ", ")),
		BackgroundIntent: "the outcome benchmark: does the loop converge",
		Deliverables:     strings.Join(files, ", "),
		DefinitionOfDone: "every check `grep -qx 'NAME ok' out/NAME.txt` passes",
	}
}

// jobs lists the projects of a run in a stable order.
func (c *Config) jobs() []job {
	var out []job
	for _, p := range c.Profiles {
		for _, n := range c.Sizes {
			for _, s := range c.Seeds {
				out = append(out, job{p, n, s})
			}
		}
	}
	return out
}

type job struct {
	profile string
	size    int
	seed    uint64
}

func (c *Config) runners() []string {
	var out []string
	for _, s := range c.Slots {
		out = append(out, aotRunner(s))
	}
	return append(out, RunnerSaidDone, RunnerChecksPass)
}

// Run runs every runner on every project, Jobs projects at once, and
// returns the results in a stable order.
func Run(ctx context.Context, c Config) []Result {
	jobs := c.jobs()
	results := make([][]Result, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, c.Jobs) {
		wg.Go(func() {
			for i := range next {
				results[i] = c.project(ctx, jobs[i])
			}
		})
	}
	// The biggest projects first, so that the last ones to finish are short.
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return jobs[order[a]].size > jobs[order[b]].size })
	for _, i := range order {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	var out []Result
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// project runs every runner on fresh copies of one project.
func (c *Config) project(ctx context.Context, j job) []Result {
	var out []Result
	for _, runner := range c.runners() {
		r := Result{Profile: j.profile, Size: j.size, Seed: j.seed, Runner: runner}
		r.Dir = filepath.Join(c.Work, fmt.Sprintf("%s-%02d-s%d-%s", j.profile, j.size, j.seed, slug(runner)))
		if ctx.Err() != nil {
			r.Err = "cancelled"
			out = append(out, r)
			continue
		}
		if err := c.runOne(ctx, &r); err != nil {
			r.Err = err.Error()
		}
		if !c.Keep && r.Err == "" {
			_ = os.RemoveAll(r.Dir)
		}
		out = append(out, r)
	}
	return out
}

func slug(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ReplaceAll(s, ", ", "-"))
}

func (c *Config) runOne(ctx context.Context, r *Result) error {
	spec := Project(r.Size)
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return err
	}
	logs := filepath.Join(r.Dir, ".sim")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	specPath := filepath.Join(logs, "spec.json")
	if err := simagent.WriteSpec(specPath, spec); err != nil {
		return err
	}
	cmd := c.agentCommand(r, specPath, logs)
	var err error
	start := time.Now()
	switch r.Runner {
	case RunnerSaidDone, RunnerChecksPass:
		err = c.baseline(ctx, r, spec, cmd)
	default:
		if err = c.initState(ctx, r.Dir, spec); err == nil {
			err = c.aotRun(ctx, r, cmd)
		}
	}
	r.Wall = time.Since(start)
	r.LeftWhat = leftovers(filepath.Join(logs, "pids"), filepath.Base(c.Sim), specPath, r.Dir)
	r.Left = len(r.LeftWhat)
	r.Complete = complete(r.Dir, spec)
	r.Calls = countLines(filepath.Join(logs, "calls"))
	r.Tokens = sumUsage(filepath.Join(logs, "ledger"))
	return err
}

func (c *Config) agentCommand(r *Result, specPath, logs string) string {
	args := []string{c.Sim, "-spec", specPath, "-profile", r.Profile, "-seed", strconv.FormatUint(r.Seed, 10),
		"-calls", filepath.Join(logs, "calls"), "-pids", filepath.Join(logs, "pids"), "-ledger", filepath.Join(logs, "ledger")}
	args = append(args, c.SimFlags...)
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// initState builds the project's state file with the real aot: aot init with
// a check and an atom per deliverable, then the OR choices with aot atom add.
// Bounds are aot's defaults.
func (c *Config) initState(ctx context.Context, dir string, spec *simagent.Spec) error {
	obj := goal(spec)
	args := []string{"init", "--goal", obj.Goal, "--background", obj.BackgroundIntent,
		"--deliverables", obj.Deliverables, "--done", obj.DefinitionOfDone}
	for _, d := range spec.Deliverables {
		args = append(args, "--check", d.Name+"=command:"+simagent.CheckCommand(d.Name))
	}
	var adds [][]string
	for _, d := range spec.Deliverables {
		if len(d.Alternatives) > 0 {
			for i, a := range d.Alternatives {
				add := []string{"atom", "add", a.Atom, "--or-group", "G" + d.Name,
					"--description", fmt.Sprintf("Write %s containing the line '%s ok', approach %d", simagent.File(d.Name), d.Name, i+1)}
				if len(d.DependsOn) > 0 {
					add = append(add, "--depends-on", strings.Join(d.DependsOn, ","))
				}
				adds = append(adds, add)
			}
			continue
		}
		args = append(args, "--atom", fmt.Sprintf("%s=Write %s containing the line '%s ok'", d.Name, simagent.File(d.Name), d.Name))
		if len(d.DependsOn) > 0 {
			args = append(args, "--depends-on", d.Name+"="+strings.Join(d.DependsOn, ","))
		}
	}
	for _, a := range append([][]string{args}, adds...) {
		cmd := exec.CommandContext(ctx, c.AOT, a...)
		cmd.Dir = dir
		cmd.Env = cleanEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("aot %s: %v: %s", a[0], err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// cleanEnv is the environment without AOT_ variables of the caller's own
// loop (a state file, an agent command, a usage file).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AOT_") {
			env = append(env, kv)
		}
	}
	return env
}

type aotOut struct {
	Reason   string      `json:"reason"`
	ExitCode int         `json:"exit_code"`
	Message  string      `json:"message"`
	Usage    agent.Usage `json:"usage"`
}

// aotRun runs aot run in the project with the runner's slots and records
// its claim, stop reason and the tokens it counted.
func (c *Config) aotRun(ctx context.Context, r *Result, agentCmd string) error {
	var slots int
	if _, err := fmt.Sscanf(r.Runner, "aot run, %d", &slots); err != nil {
		return fmt.Errorf("runner %q: %v", r.Runner, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.RunTimeout)
	defer cancel()
	args := []string{"run", "--json", "--agent-command", agentCmd,
		"--agent-timeout", c.AgentTimeout.String(), "--max-parallel", strconv.Itoa(slots)}
	if c.Isolation != "" {
		args = append(args, "--isolation", c.Isolation)
	}
	cmd := exec.CommandContext(ctx, c.AOT, args...)
	proc.Group(cmd)
	cmd.Dir = r.Dir
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		r.Reason, r.Exit = "killed by the harness after "+c.RunTimeout.String(), -1
		return nil
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("aot run: %v", err)
	}
	r.Exit = cmd.ProcessState.ExitCode()
	r.Claimed = r.Exit == 0
	var out aotOut
	if jerr := json.Unmarshal(stdout.Bytes(), &out); jerr != nil {
		r.Reason = fmt.Sprintf("exit %d, no JSON: %s", r.Exit, oneLine(stderr.String()+stdout.String()))
		return nil
	}
	r.Reason = out.Reason
	r.Reported = out.Usage.InputTokens + out.Usage.OutputTokens
	return nil
}

// baseline reruns one whole-goal prompt: until the agent says it is done
// (a), or until every check passes (b), at most CallFactor x deliverables
// calls, each with the per-call timeout and its process group killed on it.
func (c *Config) baseline(ctx context.Context, r *Result, spec *simagent.Spec, agentCmd string) error {
	ctx, cancel := context.WithTimeout(ctx, c.RunTimeout)
	defer cancel()
	obj := goal(spec)
	limit := c.CallFactor * len(spec.Deliverables)
	last := ""
	r.Reason = fmt.Sprintf("gave up after %d calls", limit)
	for call := 1; call <= limit; call++ {
		if ctx.Err() != nil {
			r.Reason = "killed by the harness after " + c.RunTimeout.String()
			return nil
		}
		t := agent.Task{
			Role: agent.Worker, Objective: obj, Bindings: map[string]agent.Binding{}, Workdir: r.Dir,
			Atom:    agent.AtomRef{ID: spec.GoalAtom, Description: obj.Goal, DependsOn: []string{}},
			Attempt: call, LastFailure: last,
		}
		usage := filepath.Join(r.Dir, ".sim", fmt.Sprintf("usage-%d", call))
		res, err := c.call(ctx, agentCmd, t, usage)
		r.Reported += sumUsage(usage)
		switch {
		case r.Runner == RunnerChecksPass && complete(r.Dir, spec):
			r.Claimed, r.Reason = true, fmt.Sprintf("checks passed after %d calls", call)
			return nil
		case r.Runner == RunnerSaidDone && err == nil && res.Success:
			r.Claimed, r.Reason = true, fmt.Sprintf("said done after %d calls", call)
			return nil
		case err != nil:
			last = err.Error()
		default:
			last = res.Summary
		}
	}
	return nil
}

// call runs the agent once on a task the way aot's exec agent does: through
// the shell, in its own process group, killed as a group at the timeout.
func (c *Config) call(ctx context.Context, agentCmd string, t agent.Task, usageFile string) (agent.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.AgentTimeout)
	defer cancel()
	in, err := json.Marshal(t)
	if err != nil {
		return agent.Result{}, err
	}
	cmd := proc.Shell(ctx, agentCmd)
	cmd.Dir = t.Workdir
	cmd.Env = append(cleanEnv(), "AOT_ROLE="+string(t.Role), "AOT_ATOM_ID="+t.Atom.ID,
		"AOT_ATTEMPT="+strconv.Itoa(t.Attempt), "AOT_USAGE_FILE="+usageFile)
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	err = cmd.Run()
	if ctx.Err() != nil {
		return agent.Result{}, fmt.Errorf("timed out; process group killed")
	}
	if err != nil {
		return agent.Result{}, fmt.Errorf("agent: %v", err)
	}
	return agent.Decode(t.Role, bytes.TrimSpace(out.Bytes()))
}

// complete reports whether every deliverable's check passes.
func complete(dir string, spec *simagent.Spec) bool {
	for _, d := range spec.Deliverables {
		if !simagent.Done(dir, d.Name) {
			return false
		}
	}
	return true
}

func countLines(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(data, []byte("\n"))
}

// sumUsage adds up a file of usage lines.
func sumUsage(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var n int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var u agent.Usage
		if json.Unmarshal(sc.Bytes(), &u) == nil {
			n += u.InputTokens + u.OutputTokens
		}
	}
	return n
}

// leftovers finds the sim's processes (agents and their background
// children) still alive after the runner returned, kills them so that
// nothing outlives the benchmark, and returns their pids-file lines. A
// process is this run's only if it still is: a sim whose command line names
// this run's spec file, or a sleep whose working directory or environment
// is this run's project. Pids are reused, and 16 runs at once on a machine
// whose pid_max is 32768 wrap around within minutes, so a pid alone could
// name another run's sim.
func leftovers(pidsFile, sim, specPath, dir string) []string {
	data, err := os.ReadFile(pidsFile)
	if err != nil {
		return nil
	}
	what := map[int]string{}
	var pids []int
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		if _, seen := what[pid]; !seen {
			pids = append(pids, pid)
		}
		what[pid] = line
	}
	sort.Ints(pids)
	alive := func() []int {
		var out []int
		for _, pid := range pids {
			if ours(pid, sim, specPath, dir) {
				out = append(out, pid)
			}
		}
		return out
	}
	left := alive()
	if len(left) > 0 {
		// A group just killed may take a moment to be reaped.
		time.Sleep(200 * time.Millisecond)
		left = alive()
	}
	var out []string
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		out = append(out, what[pid])
	}
	return out
}

// ours reports whether pid is a live (not zombie) sim or sleep process of
// the run whose spec file is specPath and whose project is dir.
func ours(pid int, sim, specPath, dir string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv := strings.Split(string(cmdline), "\x00")
	switch base := filepath.Base(argv[0]); {
	case base == sim:
		return slices.Contains(argv, specPath)
	case base == "sleep" && len(argv) > 1 && argv[1] == "1000":
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))) {
			return true
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		return err == nil && bytes.Contains(env, []byte(dir))
	}
	return false
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
