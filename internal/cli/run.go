package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"

	"os"
	"os/signal"

	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/local"

	"github.com/aot-loop/aot/internal/state"
)

type runOptions struct {
	IO           *streams
	Global       *globalOptions
	Agent        string
	Model        string
	Roles        []string
	AgentCommand string
	// Settings are the run's own choices, handed whole to either engine
	// (local.Options, or the Temporal workflow's input).
	engine.Settings
	Verbose     bool // accepted for old scripts: progress is printed by default
	Quiet       bool
	Detach      bool     // start the engine in the background and return (detach.go)
	self        string   // the path that runs aot again, for --detach
	args        []string // the command line without the program's name, for --detach
	WorktreeDir string
	Confine     string // auto or off
	Engine      string // local or temporal
	TaskQueue   string // temporal: the workers' task queue
	Remote      string // temporal: the git remote the workers use
	Attach      string // temporal: a workflow id to reattach to on purpose

	// The agents, built from the agents file and the flags before the state
	// file is looked at: a usage error comes first.
	agents    agent.Agent
	agentsCfg backend.Config
	guard     *confine.Guard
}

const runLong = `Run the loop until it halts: check that the state may start (a clear list
of what is missing otherwise) and that each role's program is there (the
CLI on PATH or at its bin:, the exec command's program: a missing one is
refused with exit 2 and the fix, nothing started; aot doctor checks the
whole setup), mark it running, then repeat: reset orphaned
atoms, honour stop and redirect requests, start agents on the executable
atoms (in parallel, at most max_parallel_agents, each in its own process
group with a deadline), integrate each result as it arrives, backtrack failed
OR choices, probe and then decompose atoms that keep failing, and when
nothing is left to do run the base case's checks itself. Only passing checks
complete the loop; an agent's word never does.

Every transition goes to the journal (.claude/aot-loop/events.ndjson) and the
state file follows within a second. Agent logs are kept per attempt in
.claude/aot-loop/logs/. A run on a stopped loop resumes it; a run after a
crash (killed engine) resumes where the journal ends. aot stop (or Ctrl-C)
stops the loop within a second, keeping all state; aot redirect changes it
while it runs.

The exec agent (--agent exec --agent-command CMD) runs CMD through the shell
for every task, in the project root, with the task as JSON on stdin and the
environment variables AOT_ROLE, AOT_ATOM_ID, AOT_STATE_FILE (an absolute
path), AOT_ATTEMPT, AOT_USAGE_FILE and AOT_PROC_TOKEN; it must print one JSON
result on stdout. Anything else, a non-zero exit, a timeout or a crash is a
failed attempt. The README's "exec agent protocol" has every role's task and
answer; aot logs shows what each attempt printed.

--detach starts the same run in the background, in a session and process
group of its own (it outlives the terminal or the agent session that
started it), its output appended to run.out in the loop's folder
(.claude/aot-loop/), and returns once the engine holds the run lock,
printing the engine's pid and that file ({success, pid, log} with --json).
It refuses when an engine already runs the loop; an engine that ends at
once is reported with the end of its output and its exit code.

Progress is printed as it happens, one line per event ([mm:ss] elapsed),
on a terminal or not (a pipe, a file, CI): --quiet leaves only the final
outcome line. With --json, stdout holds only the JSON document and the
progress lines go to stderr (--quiet silences them). JSON: {reason,
exit_code, message, iterations, resolved, unresolved, usage, waits?,
elapsed}, with either engine.

With --engine temporal the run's settings travel with the workflow:
--max-parallel, --max-iterations, --agent-timeout, --no-wait, and
--check-timeout for the base case the workers check. --isolation may be
auto or worktree there (every attempt runs in a worktree of its own on a
worker). What only a local run has is refused with --engine temporal:
--isolation none or shared, --keep-failed, --worktree-dir, --confine (each
worker confines the agents it runs) and --detach; --task-queue, --remote
and --attach are refused without it. AOT_WORKTREE_DIR is read by local
runs only.

` + engine.ExitCodes

func newCmdRun(d *deps, g *globalOptions, runF func(*runOptions) error) *cobra.Command {
	opts := &runOptions{IO: d.io, Global: g, self: d.self, args: d.args}
	var timeout, checkTimeout string
	cmd := &cobra.Command{
		Use:   "run [--agent exec --agent-command CMD] [--max-parallel N] [--max-iterations N] [--agent-timeout D]",
		Short: "Run the loop until the base case passes or a bound stops it",
		Long:  runLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if opts.AgentCommand == "" {
				opts.AgentCommand = d.getenv("AOT_AGENT_COMMAND")
			}
			if opts.Quiet && opts.Verbose {
				return usagef("--quiet and --verbose contradict each other")
			}
			if opts.MaxParallel < 0 || opts.MaxIterations < 0 {
				return usagef("--max-parallel and --max-iterations must not be negative")
			}
			if timeout != "" {
				t, err := state.ParseDuration(timeout)
				if err != nil || t <= 0 {
					return usagef("--agent-timeout %q: want seconds or a duration like 10m", timeout)
				}
				opts.AgentTimeout = t
			}
			if checkTimeout != "" {
				t, err := state.ParseDuration(checkTimeout)
				if err != nil || t <= 0 {
					return usagef("--check-timeout %q: want seconds or a duration like 10m", checkTimeout)
				}
				opts.CheckTimeout = t
			}
			if err := engineFlags(cmd.Flags(), opts); err != nil {
				return err
			}
			if opts.Attach != "" { // the workflow has its agents
				if runF != nil {
					return runF(opts)
				}
				return runRun(cmd.Context(), opts)
			}
			var err error
			if opts.Engine == engineTemporal {
				err = checkLoopAgents(agentChoice{Agent: opts.Agent, Model: opts.Model, Roles: opts.Roles})
			} else {
				opts.agents, opts.agentsCfg, err = buildAgents(opts.Global.StateFile, agentChoice{Agent: opts.Agent, Model: opts.Model, Roles: opts.Roles, Command: opts.AgentCommand})
			}
			if err != nil {
				return err
			}
			if opts.Confine != confine.ModeAuto && opts.Confine != confine.ModeOff {
				return usagef("--confine %q: choose auto or off", opts.Confine)
			}
			opts.guard = guardFor(d.self, opts.Confine)
			if runF != nil {
				return runF(opts)
			}
			return runRun(cmd.Context(), opts)
		}),
	}
	f := cmd.Flags()
	addAgentFlags(f, &opts.Agent, &opts.Model, &opts.Roles, &opts.AgentCommand)
	f.IntVar(&opts.MaxParallel, "max-parallel", 0, "agents at once for this run (default: constraints.max_parallel_agents)")
	f.IntVar(&opts.MaxIterations, "max-iterations", 0, "iteration bound for this run (default: constraints.max_iterations)")
	f.StringVar(&timeout, "agent-timeout", "", "deadline of one agent attempt (default 30m)")
	f.StringVar(&checkTimeout, "check-timeout", "", "deadline of each base-case command that sets no timeout of its own (default 60s)")
	f.BoolVarP(&opts.Verbose, "verbose", "v", false, "print the progress lines (the default; kept for old scripts)")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "no progress lines, only the outcome")
	f.StringVar(&opts.Isolation, "isolation", engine.IsolationAuto, "how workers are kept apart: auto (a git worktree per attempt in a git repository, else none), worktree, none (one worker at a time in the project root), shared (in parallel in the project root)")
	f.BoolVar(&opts.KeepFailed, "keep-failed", false, "keep failed attempts' worktrees and branches for a look (aot status lists them)")
	f.StringVar(&opts.WorktreeDir, "worktree-dir", os.Getenv("AOT_WORKTREE_DIR"), "where the attempts' worktrees live, one folder per loop (default: the user cache folder, aot/worktrees/<repository>-<hash>; env AOT_WORKTREE_DIR)")
	f.StringVar(&opts.Confine, "confine", confine.ModeAuto, "auto (Linux with Landlock: agents may write only in their workdir, its git folders, the temp folder, the state file's folder and their CLIs' folders) or off")
	f.StringVar(&opts.Engine, "engine", engineLocal, "local (this process coordinates) or temporal (a Temporal workflow, attempts on aot workers, which run only their own agents: --agent picks one by name; TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE)")
	f.StringVar(&opts.TaskQueue, "task-queue", "aot", "temporal: the task queue the aot workers poll")
	f.StringVar(&opts.Remote, "remote", "origin", "temporal: the git remote the workers fetch from and push to")
	f.BoolVar(&opts.Detach, "detach", false, "start the engine in the background (its own session, output in the loop's folder: run.out) and return once it runs")
	f.StringVar(&opts.Attach, "attach", "", "temporal: reattach to the workflow with this id, on purpose (its loop is projected into the state file)")
	f.BoolVar(&opts.NoWait, "no-wait", false, "stop on a usage-limit answer (exit 10) instead of waiting for the quota's reset time")
	return cmd
}

func runRun(ctx context.Context, opts *runOptions) error {
	if opts.Attach == "" && opts.Engine != engineTemporal { // a workflow's agents run on its workers
		root, err := opts.Global.projectRoot()
		if err != nil {
			return err
		}
		if err := startPreflight(ctx, opts.IO, opts.agentsCfg, root); err != nil {
			return err
		}
	}
	if opts.Detach {
		return runDetach(opts)
	}
	switch opts.Engine {
	case engineTemporal:
		return runTemporal(ctx, opts)
	case engineLocal, "":
	default:
		return usagef("--engine %q: choose local or temporal", opts.Engine)
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	// The logs go beside the journal, in the real state file's folder; the
	// engine checks the state file before any agent runs.
	eo := localOptions(opts)
	if isTerminal(opts.IO.In) {
		eo.Confirm = confirmOnTerminal(opts.IO)
	}
	switch {
	case opts.Quiet:
	case opts.Global.JSON:
		eo.Progress = opts.IO.ErrOut // stdout holds the one JSON document
	default:
		eo.Progress = opts.IO.Out
	}
	out, err := local.Run(ctx, eo)
	if err != nil {
		var nr *engine.NotReadyError
		if errors.As(err, &nr) {
			return err
		}
		return describeReadError(err)
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, runDoc(out))
	} else {
		verdict := opts.IO.status("stopped")
		if out.Reason == engine.Completed {
			verdict = opts.IO.status("completed")
		}
		fmt.Fprintf(opts.IO.Out, "%s (%s): %s\n", verdict, out.Reason, out.Message)
		fmt.Fprintf(opts.IO.Out, "%d iterations, %d resolved, %d unresolved, %s", out.Iterations, out.Resolved, out.Unresolved, out.Elapsed)
		if u := out.Usage; u.Tokens() > 0 || u.CostUSD > 0 {
			fmt.Fprintf(opts.IO.Out, ", %d tokens, $%.4f", u.Tokens(), u.CostUSD)
		}
		fmt.Fprintln(opts.IO.Out)
	}
	if out.ExitCode != 0 {
		return reported(out.ExitCode)
	}
	return nil
}

// localOptions are what the local engine runs with: the run's settings
// whole, and what only a local run has (its agents built here, the
// worktree folder, the guard).
func localOptions(opts *runOptions) local.Options {
	return local.Options{
		Settings:    opts.Settings,
		StateFile:   opts.Global.StateFile,
		Agent:       opts.agents,
		Agents:      agentsDoc(opts.agentsCfg),
		WorktreeDir: opts.WorktreeDir,
		Guard:       opts.guard,
	}
}

// runDoc is aot run's JSON document: the outcome, and when the engine could
// not go on, the documented error shape beside it.
func runDoc(out engine.Outcome) any {
	if out.Reason != engine.Failed {
		return out
	}
	return struct {
		engine.Outcome
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}{out, false, out.Message}
}

// signalContext is cancelled by Ctrl-C, SIGTERM or SIGHUP (a closed terminal
// or a dropped SSH session), with the signal as its cause: each stops the
// loop like aot stop, killing its agents and keeping the state. A closed
// terminal must not kill the engine through a write either: SIGPIPE is
// ignored, so writes to a vanished stdout fail instead.
func signalContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	signal.Ignore(syscall.SIGPIPE)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			cancel(fmt.Errorf("%s received", signalName(sig)))
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT (Ctrl-C)"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP (terminal closed)"
	}
	return sig.String()
}

// --- aot stop ---

type stopOptions struct {
	IO     *streams
	Global *globalOptions
	Reason string
	Wait   time.Duration
}

func newCmdStop(d *deps, g *globalOptions, runF func(*stopOptions) error) *cobra.Command {
	opts := &stopOptions{IO: d.io, Global: g, Wait: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "stop [--reason R]",
		Short: "Stop the loop; all state is kept",
		Long: `Stop the loop. A running engine sees the request within a second, kills its
running agents, returns their atoms to pending and records the stop; aot stop
waits for that. Without a running engine, a loop marked running (its engine
died) or pending is marked stopped. aot run resumes a stopped loop.
A loop on Temporal: its workflow is cancelled, and aot stop waits up to 45s
for it to close; it exits 1 when it has not (no worker polls its task queue,
or its workers are still stopping its attempts), and says which.

JSON: {success, status, reason, engine_pid}.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return stopRun(opts)
		}),
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the loop is stopped")
	return cmd
}

type stopDoc struct {
	Success   bool   `json:"success"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	EnginePID int    `json:"engine_pid,omitempty"`
}

func stopRun(opts *stopOptions) error {
	ctl, done := controllerFor(opts.Global, time.Now, askWorkflow)
	defer done()
	ctx, cancel := controlWait(ctl, opts.Wait, true)
	defer cancel()
	res, err := ctl.Stop(ctx, strings.TrimSpace(opts.Reason))
	if err != nil {
		return describeReadError(err)
	}
	if res.Workflow != nil {
		return workflowStopped(opts, res)
	}
	doc := stopDoc{Success: true, Status: res.Status, Reason: strings.TrimSpace(opts.Reason), EnginePID: res.EnginePID}
	if doc.Reason == "" {
		doc.Reason = "aot stop"
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, doc)
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "loop is %s (%s)\n", opts.IO.status(doc.Status), orDash(res.Reason))
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// confirmOnTerminal asks the person at the terminal whether an assertion
// the judge passed holds, before the loop completes on it. Only "y" or
// "yes" confirms; the question waits for an answer (aot stop or Ctrl-C
// ends the wait as a stop).
func confirmOnTerminal(io *streams) func(ctx context.Context, item, evidence string) (bool, error) {
	in := bufio.NewReader(io.In)
	return func(ctx context.Context, item, evidence string) (bool, error) {
		w := io.ErrOut
		fmt.Fprintf(w, "\nThe judge passed the assertion %q:\n  %s\nDoes it hold? [y/N] ", item, dag.OneLine(evidence, 400))
		type answer struct {
			line string
			err  error
		}
		got := make(chan answer, 1)
		go func() {
			l, err := in.ReadString('\n')
			got <- answer{l, err}
		}()
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case a := <-got:
			if a.err != nil && a.line == "" {
				return false, fmt.Errorf("no answer from the terminal: %w", a.err)
			}
			yes := strings.EqualFold(strings.TrimSpace(a.line), "y") || strings.EqualFold(strings.TrimSpace(a.line), "yes")
			if yes {
				fmt.Fprintln(w, "confirmed.")
			} else {
				fmt.Fprintln(w, "refused: the check fails.")
			}
			return yes, nil
		}
	}
}
