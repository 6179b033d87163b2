package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/demo"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/local"
)

type demoOptions struct {
	IO     *streams
	Global *globalOptions
	Dir    string
	Pace   time.Duration
	self   string // the absolute path the agent runs this program by
	argv0  string // how the person invoked it, for the commands the demo suggests
}

func newCmdDemo(d *deps, g *globalOptions, runF func(*demoOptions) error) *cobra.Command {
	opts := &demoOptions{IO: d.io, Global: g, self: d.self, argv0: d.argv0}
	cmd := &cobra.Command{
		Use:   "demo [DIR]",
		Short: "Watch a whole loop in under a minute, no LLM needed",
		Long: `Create a small example project in DIR (default: a new directory under the
system's temporary directory) and run the loop on it with a scripted agent:
two atoms in parallel, an OR alternative that fails and backtracks, an atom
that fails twice and is split by the planner, the parent resolving by itself,
then aot's own verification of the base case and the halt.

The agent is a real process per task (aot demo-agent, through the exec
protocol), so the demo exercises exactly what a real agent would.
Afterwards, inspect it with: aot status --state-file DIR/.claude/aot-loop-state.md

DIR must not hold a state file already: the demo never replaces one (exit 1).
JSON: the outcome of aot run, {reason, exit_code, message, iterations,
resolved, unresolved, usage, elapsed}, with dir and state_file.`,
		Args: cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Dir = args[0]
			}
			if opts.Pace < 0 {
				return usagef("--pace must not be negative")
			}
			if runF != nil {
				return runF(opts)
			}
			return demoRun(cmd.Context(), opts)
		}),
	}
	cmd.Flags().DurationVar(&opts.Pace, "pace", demo.Pace, "how long each scripted agent step takes")
	return cmd
}

func demoRun(ctx context.Context, opts *demoOptions) error {
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "aot-demo-"); err != nil {
			return err
		}
	}
	path, err := demo.Write(dir)
	if err != nil {
		return err
	}
	out := opts.IO.Out
	if !opts.Global.JSON {
		fmt.Fprintf(out, "demo project: %s\n\n", dir)
	}
	cmdline := shellQuote(opts.self) + " demo-agent --pace " + opts.Pace.String()
	eo := local.Options{Settings: engine.Settings{AgentTimeout: time.Minute}, StateFile: path, Agent: &agent.Exec{Command: cmdline}}
	if !opts.Global.JSON {
		eo.Progress = out
	}
	o, err := local.Run(ctx, eo)
	if err != nil {
		return err
	}
	if opts.Global.JSON {
		writeJSON(out, demoDoc{Outcome: o, Dir: dir, StateFile: path})
	} else {
		fmt.Fprintf(out, "\n%s (%s): %s\n", opts.IO.status(map[bool]string{true: "completed", false: "stopped"}[o.Reason == engine.Completed]), o.Reason, o.Message)
		fmt.Fprintf(out, "%d iterations, %d atoms resolved, %s\n\n", o.Iterations, o.Resolved, o.Elapsed)
		prog := invokedAs(opts.argv0)
		fmt.Fprintf(out, "look around:\n  %s status --state-file %s\n  %s state --state-file %s\n  cat %s\n",
			prog, shellQuote(path), prog, shellQuote(path), shellQuote(filepath.Join(filepath.Dir(path), "aot-loop", "events.ndjson")))
	}
	if o.ExitCode != 0 {
		return reported(o.ExitCode)
	}
	return nil
}

// demoDoc is aot demo's JSON document: the run's outcome and where the
// project is.
type demoDoc struct {
	engine.Outcome
	Dir       string `json:"dir"`
	StateFile string `json:"state_file"`
}

// invokedAs is how a person runs this program again from the same working
// directory, as a shell word: as it was invoked, the name alone when the
// shell found it on PATH ("aot"), the path otherwise ("./bin/aot").
func invokedAs(argv0 string) string {
	if argv0 == "" {
		return "aot"
	}
	return shellQuote(argv0)
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-:=+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// --- aot demo-agent (hidden) ---

func newCmdDemoAgent(d *deps) *cobra.Command {
	var pace time.Duration
	cmd := &cobra.Command{
		Use:    "demo-agent",
		Short:  "The scripted agent of aot demo (reads a task on stdin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return demo.Agent(d.io.In, d.io.Out, pace)
		}),
	}
	cmd.Flags().DurationVar(&pace, "pace", demo.Pace, "how long each step takes")
	return cmd
}

// selfPath is how this program can run itself again.
func selfPath() string {
	self := os.Args[0]
	if !strings.ContainsRune(self, os.PathSeparator) && !strings.ContainsRune(self, '/') {
		if p, err := exec.LookPath(self); err == nil {
			self = p
		}
	}
	if abs, err := filepath.Abs(self); err == nil {
		return abs
	}
	return self
}
