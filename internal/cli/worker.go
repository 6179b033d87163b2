//go:build temporal

package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
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
	Agents        agentChoice // defaults under each loop's own choice
	AgentsFile    string
	getenv        func(string) string
	dial          func(ctx context.Context) (client.Client, error)
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

The agents are the loop's choice (aot run's --agent, --model, --role,
--agent-command); this worker's own flags, and the agents file named by
--agents-file, fill in what the loop leaves unset (an exec agent's command,
a model). Agent logs go to the cache folder's logs/.

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
worktrees.`

func newCmdWorker(d *deps, g *globalOptions, runF func(*workerOptions) error) *cobra.Command {
	opts := &workerOptions{IO: d.io, Global: g, getenv: d.getenv, dial: durable.Dial}
	cmd := &cobra.Command{
		Use:   "worker [--task-queue aot] [--cache DIR] [--agent ... --agent-command CMD]",
		Short: "Run the attempts of Temporal loops on this machine",
		Long:  workerLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if opts.Agents.Command == "" {
				opts.Agents.Command = d.getenv("AOT_AGENT_COMMAND")
			}
			if opts.MaxActivities < 0 || opts.Grace < 0 {
				return usagef("--max-activities and --grace must not be negative")
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
			if _, err := workerAgents(cfg, opts.Agents, opts.getenv)(durable.AgentChoice{}, agent.Worker, durable.AgentDirs{}); err != nil {
				var bad *badFlagsError
				if errors.As(err, &bad) {
					return usagef("%v", bad.err)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return runWorker(cmd.Context(), opts, cfg)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.TaskQueue, "task-queue", durable.DefaultTaskQueue, "the Temporal task queue to poll (aot run --engine temporal --task-queue)")
	f.StringVar(&opts.Cache, "cache", "", "`folder` of the clones, worktrees and agent logs (default: the user cache folder's aot/worker)")
	f.StringVar(&opts.Identity, "identity", "", "this worker's name in Temporal and in the attempts (default pid@host)")
	f.IntVar(&opts.MaxActivities, "max-activities", durable.DefaultMaxActivities, "attempts, merges and verifications at once")
	f.DurationVar(&opts.Grace, "grace", durable.DefaultGrace, "how long running attempts may finish after Ctrl-C before they are cancelled")
	addAgentFlags(f, &opts.Agents.Agent, &opts.Agents.Model, &opts.Agents.Roles, &opts.Agents.Command)
	f.StringVar(&opts.AgentsFile, "agents-file", "", "an agents file ("+backend.FileName+") whose settings fill in what a loop leaves unset")
	return cmd
}

func runWorker(ctx context.Context, opts *workerOptions, file backend.Config) error {
	ctx, stop := signalContext(ctx)
	defer stop()
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
		NewAgent:      workerAgents(file, opts.Agents, opts.getenv),
		MaxActivities: opts.MaxActivities, Grace: opts.Grace,
		Started: func() {
			fmt.Fprintf(opts.IO.Out, "aot worker %s: connected to %s (namespace %s), polling task queue %s; cache %s; Ctrl-C stops\n",
				identity, address, namespace, opts.TaskQueue, opts.Cache)
		},
	}
	go func() {
		<-ctx.Done()
		fmt.Fprintf(opts.IO.ErrOut, "aot worker: %v: no new tasks; running attempts have %s to finish, then are cancelled and retried elsewhere\n",
			context.Cause(ctx), opts.Grace)
	}()
	return durable.RunWorker(ctx, wo)
}

// badFlagsError is the worker's own agent flags refused.
type badFlagsError struct{ err error }

func (e *badFlagsError) Error() string { return e.err.Error() }

// workerAgents builds a loop's agents on this worker: the agents file,
// then the worker's flags, then the loop's own choice over both; logs one
// file per attempt in logDir. Each call starts from a fresh copy, so
// attempts may build at once.
func workerAgents(file backend.Config, flags agentChoice, getenv func(string) string) func(durable.AgentChoice, agent.Role, durable.AgentDirs) (agent.Agent, error) {
	return func(ch durable.AgentChoice, role agent.Role, dirs durable.AgentDirs) (agent.Agent, error) {
		cfg := file
		cfg.Roles = maps.Clone(file.Roles)
		if err := cfg.Override(flags.Agent, flags.Model, flags.Roles); err != nil {
			return nil, &badFlagsError{err}
		}
		var roles []string
		for r, v := range ch.Roles {
			roles = append(roles, r+"="+v)
		}
		sort.Strings(roles)
		if err := cfg.Override(ch.Agent, ch.Model, roles); err != nil {
			return nil, fmt.Errorf("the loop's agents: %w", err)
		}
		command := flags.Command
		if ch.Command != "" {
			command = ch.Command
		}
		if command != "" {
			cfg.Command = command
			for r, s := range cfg.Roles {
				if s.Agent == "" || s.Agent == "exec" {
					s.Command = command
					cfg.Roles[r] = s
				}
			}
		}
		env := backend.Env{Log: attemptLogs(dirs.Logs), Getenv: getenv}
		if dirs.Prompts != "" {
			env.Prompts = prompt.Renderer{Dir: dirs.Prompts}
		}
		a, err := backend.New(cfg, env)
		if err != nil {
			return nil, err
		}
		return guardedAgent{a, guardFor(selfPath(), confine.ModeAuto)}, nil
	}
}
