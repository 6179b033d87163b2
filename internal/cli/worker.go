//go:build temporal

package cli

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/durable"
	"github.com/aot-loop/aot/internal/prompt"
)

// workerOptions are aot worker's.
type workerOptions struct {
	IO            *streams
	Global        *globalOptions
	TaskQueue     string
	Cache         string
	Identity      string
	MaxActivities int
	Grace         time.Duration
	MetricsAddr   string                // --metrics-addr: /metrics and /healthz; "" is off
	BuildID       string                // --build-id; default the binary's version
	sdkMetrics    client.MetricsHandler // where the client dialled reports the SDK's metrics
	Agents        agentChoice           // defaults under each loop's own choice
	AgentsFile    string
	Allow         durable.Allow // the loops' own commands this worker runs
	getenv        func(string) string
	dial          func(ctx context.Context) (client.Client, error)
	LogLevel      string // the SDK's log on stderr from this level (temporal.go)
}

const workerLong = `aot worker runs the attempts of loops started with aot run --engine temporal,
on this machine: any machine with the agent CLIs and access to the
repository's git remote can run one, and any number can poll one queue.

For each attempt it fetches the repository into a clone kept in its cache
folder, checks the attempt's base commit out in a worktree of its own, runs
the agent there (heartbeating to Temporal while it works; a cancelled
attempt's agent is killed with its process tree), commits what the agent
changed as a local run commits it (never the loop's state file nor its
aot-loop folder) and pushes it to the atom's branch. It also merges finished
atoms into the loop's integration branch (deleting the atom's branch in the
same push) and runs the base case there.
A worker that dies loses only its running attempts: Temporal gives them to
another worker once their heartbeats stop.

A worker runs only its own agents: those of its flags (--agent, --model,
--role, --agent-command or AOT_AGENT_COMMAND) and of the agents file named
by --agents-file. A loop (aot run's --agent, --role) picks among them by
backend name (claude, codex, gemini, exec, ...), for every role or one, and
may pick the model; it gets this worker's settings for that backend (its
binary, arguments, endpoint, command). A backend this worker does not have,
or an exec command that is not its own (aot run --agent-command), is
refused: the attempt fails naming the worker and what it refused, and the
loop stops with that reason. --allow-loop-command PATTERN (repeatable) lets
loops bring commands matching a pattern: the whole command line, where *
stands for one word of letters, digits and - _ . , : @ % + = (never a space,
a slash or a shell character) and ? for one such character, so
'/opt/agents/*.sh' allows any script of that folder and nothing else;
--allow-loop-commands lets loops bring any command (this machine's shell, to
whoever can start a loop on its queue). Workers of one task queue should
run the same agents: a loop stops at the first refusal. Agent logs go to
the cache folder's logs/.

The connection follows the Temporal CLI: TEMPORAL_ADDRESS (default
127.0.0.1:7233), TEMPORAL_NAMESPACE (default "default"), TEMPORAL_API_KEY,
TEMPORAL_TLS, TEMPORAL_TLS_CERT_PATH, TEMPORAL_TLS_KEY_PATH,
TEMPORAL_TLS_CA_PATH, TEMPORAL_TLS_SERVER_NAME,
TEMPORAL_TLS_DISABLE_HOST_VERIFICATION, and the CLI's profiles
(TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE).

Ctrl-C (or SIGTERM, SIGHUP) stops polling and gives the running activities
--grace to finish; those still running then are cancelled (agents killed,
worktrees removed) and failed at once, so that Temporal retries them on
another worker within seconds; the worker then exits 0. A worker started on
the cache of one that died kills the agents it left and removes its
worktrees.

--metrics-addr serves Prometheus metrics at /metrics (the Temporal SDK's,
and counts of attempts, failures, merges and verifications) and a health
check at /healthz (200 while the worker polls and Temporal answers, else
503 and why). The worker reports --build-id (default: this binary's
version) to Temporal. docs/TEMPORAL.md has a systemd unit and a container
recipe.`

func newCmdWorker(d *deps, g *globalOptions, runF func(*workerOptions) error) *cobra.Command {
	opts := &workerOptions{IO: d.io, Global: g, getenv: d.getenv, dial: durable.Dial}
	opts.BuildID = buildID(d.version)
	// The client reports the SDK's metrics where runWorker sets them.
	opts.dial = func(ctx context.Context) (client.Client, error) {
		return durable.DialWith(ctx, durable.DialOptions{Metrics: opts.sdkMetrics})
	}
	cmd := &cobra.Command{
		Use:   "worker [--task-queue aot] [--cache DIR] [--agent ... --agent-command CMD]",
		Short: "Run the attempts of Temporal loops on this machine",
		Long:  workerLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if opts.Agents.Command == "" {
				opts.Agents.Command = d.getenv("AOT_AGENT_COMMAND")
			}
			if err := opts.logTo(); err != nil {
				return err
			}
			if opts.MaxActivities < 0 || opts.Grace < 0 {
				return usagef("--max-activities and --grace must not be negative")
			}
			if err := checkBuildID(opts.BuildID); err != nil {
				return usagef("--build-id: %v", err)
			}
			if _, err := metricsAddr(opts.MetricsAddr); err != nil {
				return usagef("--metrics-addr: %v", err)
			}
			if opts.Cache == "" {
				dir, err := os.UserCacheDir()
				if err != nil {
					return usagef("no cache folder: give one with --cache (%v)", err)
				}
				opts.Cache = filepath.Join(dir, "aot", "worker")
			}
			// The flags are checked now, not at the first attempt.
			cfg := backend.Config{}
			if opts.AgentsFile != "" {
				data, err := os.ReadFile(opts.AgentsFile)
				if err != nil {
					return usagef("--agents-file: %v", err)
				}
				if cfg, err = backend.Parse(data); err != nil {
					return usagef("--agents-file %s: %v", opts.AgentsFile, err)
				}
			}
			own, err := workerOwnAgents(cfg, opts.Agents)
			if err != nil {
				return usagef("%v", err)
			}
			if err := knownAgents(own); err != nil {
				return err
			}
			for _, p := range opts.Allow.Patterns {
				if err := durable.CheckPattern(p); err != nil {
					return usagef("--allow-loop-command %q: %v", p, err)
				}
			}
			if _, err := durable.ChooseAgent(own, opts.Allow, durable.AgentChoice{}, agent.Worker); err != nil && !opts.Allow.Any && len(opts.Allow.Patterns) == 0 {
				fmt.Fprintln(opts.IO.ErrOut, "aot worker: no agent of its own (--agent, --agent-command, --agents-file) and no --allow-loop-command: every attempt will be refused")
			}
			if err := workerPreflight(cmd.Context(), opts.IO, cfg, opts.Agents); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runWorker(cmd.Context(), opts, own)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.TaskQueue, "task-queue", durable.DefaultTaskQueue, "the Temporal task queue to poll (aot run --engine temporal --task-queue)")
	f.StringVar(&opts.Cache, "cache", "", "`folder` of the clones, worktrees and agent logs (default: the user cache folder's aot/worker)")
	f.StringVar(&opts.Identity, "identity", "", "this worker's name in Temporal and in the attempts (default pid@host)")
	f.StringVar(&opts.MetricsAddr, "metrics-addr", "", "serve Prometheus /metrics and /healthz on `[host:]port` (a port alone listens on 127.0.0.1; default: off)")
	f.StringVar(&opts.BuildID, "build-id", opts.BuildID, "this worker's build id in Temporal (worker deployment "+durable.DeploymentName+")")
	f.IntVar(&opts.MaxActivities, "max-activities", durable.DefaultMaxActivities, "attempts, merges and verifications at once")
	f.DurationVar(&opts.Grace, "grace", durable.DefaultGrace, "how long running attempts may finish after Ctrl-C before they are cancelled")
	f.StringVar(&opts.LogLevel, "log-level", "", "the Temporal SDK's log on stderr from this `level`: debug, info, warn or error (default info, or $"+envLogLevel+")")
	addAgentFlags(f, &opts.Agents.Agent, &opts.Agents.Model, &opts.Agents.Roles, &opts.Agents.Command)
	f.StringVar(&opts.AgentsFile, "agents-file", "", "an agents file ("+backend.FileName+"): this worker's agents, with its flags over it")
	f.BoolVar(&opts.Allow.Any, "allow-loop-commands", false, "run any exec command a loop brings (aot run --agent-command): this machine's shell to whoever can start a loop")
	f.StringArrayVar(&opts.Allow.Patterns, "allow-loop-command", nil, "run the exec commands a loop brings that match `PATTERN` (repeatable; * is one word, never a space, slash or shell character)")
	return cmd
}

func runWorker(ctx context.Context, opts *workerOptions, own backend.Config) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	ln, metrics, err := listenMetrics(opts.MetricsAddr)
	if err != nil {
		return err
	}
	if metrics != nil {
		defer ln.Close()
		opts.sdkMetrics = metrics.SDK()
	}
	c, err := opts.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	identity := opts.Identity
	if identity == "" {
		identity = durable.DefaultIdentity()
	}
	address, namespace := durable.Where()
	wo := durable.WorkerOptions{
		Client: c, TaskQueue: opts.TaskQueue, CacheDir: opts.Cache, Identity: identity,
		NewAgent:      workerAgents(own, opts.Allow, opts.getenv),
		MaxActivities: opts.MaxActivities, Grace: opts.Grace,
		Listener: ln, Metrics: metrics, BuildID: opts.BuildID,
		Say: func(line string) { fmt.Fprintf(opts.IO.ErrOut, "aot worker %s: %s\n", identity, line) },
		Started: func(own string) {
			fmt.Fprintf(opts.IO.Out, "aot worker %s: connected to %s (namespace %s), polling task queue %s (and %s for the merges of its own work); cache %s; Ctrl-C stops\n",
				identity, address, namespace, opts.TaskQueue, own, opts.Cache)
			if ln != nil {
				fmt.Fprintf(opts.IO.Out, "aot worker %s: build id %s; metrics on http://%s/metrics, health on http://%s/healthz\n",
					identity, opts.BuildID, ln.Addr(), ln.Addr())
			}
		},
	}
	go func() {
		<-ctx.Done()
		fmt.Fprintf(opts.IO.ErrOut, "aot worker: %v: no new tasks; running attempts have %s to finish, then are cancelled and retried elsewhere\n",
			context.Cause(ctx), opts.Grace)
	}()
	return durable.RunWorker(ctx, wo)
}

// workerOwnAgents are the worker's agents: its agents file with its flags
// over it, as aot run applies its own.
func workerOwnAgents(file backend.Config, flags agentChoice) (backend.Config, error) {
	own := file
	own.Roles = maps.Clone(file.Roles)
	if err := own.Override(flags.Agent, flags.Model, flags.Roles); err != nil {
		return own, err
	}
	setCommand(&own, flags.Command)
	return own, nil
}

// workerAgents builds a loop's agent for a role on this worker: one of
// its own agents, as the loop picks it (durable.ChooseAgent); logs one
// file per attempt in the attempt's logs folder. Attempts may build at
// once: nothing here is written to.
func workerAgents(own backend.Config, allow durable.Allow, getenv func(string) string) func(durable.AgentChoice, agent.Role, durable.AgentDirs) (agent.Agent, error) {
	return func(ch durable.AgentChoice, role agent.Role, dirs durable.AgentDirs) (agent.Agent, error) {
		s, err := durable.ChooseAgent(own, allow, ch, role)
		if err != nil {
			return nil, err
		}
		env := backend.Env{Log: attemptLogs(dirs.Logs), Getenv: getenv}
		if dirs.Prompts != "" {
			env.Prompts = prompt.Renderer{Dir: dirs.Prompts}
		}
		a, err := backend.New(backend.Config{Spec: s}, env)
		if err != nil {
			return nil, err
		}
		return guardedAgent{a, guardFor(selfPath(), confine.ModeAuto)}, nil
	}
}
