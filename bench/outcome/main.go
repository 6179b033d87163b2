//go:build linux

// Command outcome is the outcome benchmark: does a loop converge? It runs
// aot run (at several slot counts) and two baselines that rerun one
// whole-goal prompt, all driving the same seeded simulated agent
// (bench/outcome/simagent) on projects of 4 to 32 deliverables, and reports
// completion, false completions, agent calls, tokens, wall time and leftover
// processes as a Markdown table.
//
//	GOTOOLCHAIN=local go run ./bench/outcome -seeds 20
//	GOTOOLCHAIN=local go run ./bench/outcome -seeds 3 -sizes 4,8 -profiles honest,flaky -o /tmp/outcome.md
package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aot-loop/aot/internal/simagent"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "outcome:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("outcome", flag.ContinueOnError)
	seeds := fs.Int("seeds", 20, "seeds 1..N per profile and size")
	sizes := fs.String("sizes", "4,8,16,32", "deliverables per project, comma-separated")
	profiles := fs.String("profiles", strings.Join(simagent.ProfileNames(), ","), "sim profiles, comma-separated")
	slots := fs.String("slots", "1,3", "aot run --max-parallel values, one runner each")
	jobs := fs.Int("jobs", 16, "projects run at once (most of a run is waiting: hangs, timeouts, backoff)")
	agentTimeout := fs.Duration("agent-timeout", 2*time.Second, "aot run --agent-timeout and the baselines' per-call timeout")
	runTimeout := fs.Duration("run-timeout", 5*time.Minute, "a whole aot run or baseline loop is killed after this")
	factor := fs.Int("call-factor", 3, "the baselines stop after this many calls per deliverable")
	background := fs.Float64("background", 0.1, "probability that a sim call leaves a `sleep 1000 &` behind")
	planner := fs.String("planner", "empty", `sim planner: "empty" ({"atoms": []}) or "fix"`)
	simFlags := fs.String("sim-flags", "", "more sim flags, space-separated (e.g. \"-p 0.8 -duration 10ms\")")
	aotBin := fs.String("aot", "", "aot binary (default: go build ./cmd/aot)")
	simBin := fs.String("sim", "", "simagent binary (default: go build ./bench/outcome/simagent)")
	work := fs.String("work", "", "directory for the projects (default: a temporary one)")
	isolation := fs.String("isolation", "shared", "aot run --isolation (\"\" to leave aot's default: none outside a git repository, one worker at a time)")
	keep := fs.Bool("keep", false, "keep the projects (state files, journals, sim logs)")
	outFile := fs.String("o", "", "also write the report to this file")
	resultsFile := fs.String("results", "", "write every run's result to this file, one JSON object a line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := Config{
		Jobs: *jobs, AgentTimeout: *agentTimeout, RunTimeout: *runTimeout, CallFactor: *factor, Keep: *keep, Isolation: *isolation,
		Profiles: splitList(*profiles),
		SimFlags: append([]string{"-background", strconv.FormatFloat(*background, 'g', -1, 64), "-planner", *planner}, strings.Fields(*simFlags)...),
	}
	for i := 1; i <= *seeds; i++ {
		c.Seeds = append(c.Seeds, uint64(i))
	}
	var err error
	if c.Sizes, err = intList(*sizes); err != nil {
		return err
	}
	if c.Slots, err = intList(*slots); err != nil {
		return err
	}
	for _, p := range c.Profiles {
		if _, ok := simagent.Profiles[p]; !ok {
			return fmt.Errorf("unknown profile %q", p)
		}
	}
	if *seeds < 1 || len(c.Sizes) == 0 || len(c.Profiles) == 0 || c.CallFactor < 1 {
		return fmt.Errorf("need at least one seed, size and profile, and -call-factor >= 1")
	}
	tmp, err := os.MkdirTemp("", "aot-outcome-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	c.Work = *work
	if c.Work == "" {
		c.Work = filepath.Join(tmp, "work")
	}
	if c.AOT, c.Sim, err = Binaries(filepath.Join(tmp, "bin"), *aotBin, *simBin); err != nil {
		return err
	}
	c.Revision = revision(c.AOT)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	results := Run(ctx, c)
	if *resultsFile != "" {
		var lines bytes.Buffer
		enc := json.NewEncoder(&lines)
		for _, r := range results {
			_ = enc.Encode(r)
		}
		if err := os.WriteFile(*resultsFile, lines.Bytes(), 0o644); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	Report(&buf, c, results, "go run ./bench/outcome "+strings.Join(quoteAll(args), " "), time.Since(start))
	if *keep {
		fmt.Fprintf(&buf, "\nProjects kept in %s\n", c.Work)
	}
	if _, err := stdout.Write(buf.Bytes()); err != nil {
		return err
	}
	if *outFile != "" {
		return os.WriteFile(*outFile, buf.Bytes(), 0o644)
	}
	return ctx.Err()
}

// Report writes the header, the table and the targets.
func Report(w io.Writer, c Config, results []Result, command string, took time.Duration) {
	rev := c.Revision
	if rev == "" {
		rev = revision(c.AOT)
	}
	built := "unknown"
	if st, err := os.Stat(c.AOT); err == nil {
		built = st.ModTime().UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "Outcome benchmark: %d cores, %s/%s, %s, aot %s (built %s); %d seeds, %d jobs at once, agent timeout %s, isolation %q; took %s\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), rev, built, len(c.Seeds), c.Jobs, c.AgentTimeout, c.Isolation, took.Round(time.Second))
	fmt.Fprintf(w, "    %s\n\n", command)
	rows := Aggregate(c, results)
	Markdown(w, rows)
	fmt.Fprintln(w)
	WriteTargets(w, Targets(rows, 0))
	first := true
	for _, r := range results {
		if r.Left == 0 || !strings.HasPrefix(r.Runner, "aot") {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nProcesses aot left behind (pids-file lines; the harness killed them afterwards):")
			first = false
		}
		fmt.Fprintf(w, "- %s N=%d seed %d, %s (%s): %s\n", r.Profile, r.Size, r.Seed, r.Runner, r.Reason, strings.Join(r.LeftWhat, "; "))
	}
}

// Binaries returns the aot and simagent binaries: the given paths, else
// built from this module into dir.
func Binaries(dir, aotBin, simBin string) (string, string, error) {
	build := func(given, name, pkg string) (string, error) {
		if given != "" {
			return filepath.Abs(given)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		out := filepath.Join(dir, name)
		cmd := exec.Command(goTool(), "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
		}
		return out, nil
	}
	a, err := build(aotBin, "aot", "github.com/aot-loop/aot/cmd/aot")
	if err != nil {
		return "", "", err
	}
	s, err := build(simBin, "simagent", "github.com/aot-loop/aot/bench/outcome/simagent")
	return a, s, err
}

// goTool is the go command of the running toolchain when there is one.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// revision says which aot the run measured: the VCS stamp go build put in
// the binary, else (a binary built here without one) the module's git
// revision now, with "+dirty" for uncommitted changes.
func revision(bin string) string {
	if info, err := buildinfo.ReadFile(bin); err == nil {
		rev, dirty := "", ""
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && len(s.Value) >= 12:
				rev = s.Value[:12]
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			}
		}
		if rev != "" {
			return rev + dirty
		}
	}
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "(unknown revision)"
	}
	return "at " + strings.TrimSpace(string(out))
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = shellQuote(a)
	}
	return out
}
