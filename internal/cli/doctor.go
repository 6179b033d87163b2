package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/preflight"
	"github.com/aot-loop/aot/internal/state"
)

type doctorOptions struct {
	IO          *streams
	Global      *globalOptions
	Agents      agentChoice
	WorktreeDir string
	Engine      string
	Online      bool
	getenv      func(string) string
}

const doctorLong = `Check this machine and project before a run, without starting anything or
sending a request to a model (unless --online). Each line is ok, warning or
error, with the fix:

  - each agent the roles run (the same choice aot run makes: --agent,
    --model, --role, --agent-command or AOT_AGENT_COMMAND, the agents file
    .claude/aot-agents.yaml): its CLI found on PATH (claude, codex, gemini;
    for the exec agent its command's program) and its --version;
  - whether each CLI can log in: an API key in the environment or the CLI's
    own login (~/.claude/.credentials.json, ~/.codex/auth.json or a
    provider's env_key in ~/.codex/config.toml, ~/.gemini/settings.json's
    auth type with GEMINI_API_KEY or ~/.gemini/oauth_creds.json);
  - git on PATH (2.38 or later), the project in a repository with a commit,
    and a throwaway worktree made and removed in the attempts' worktree
    folder (--worktree-dir, AOT_WORKTREE_DIR, else the user cache folder);
  - the state file's folder writable (the journal and the agent logs);
  - the kernel sandbox (Landlock) that confines the agents' writes;
  - with --engine temporal or TEMPORAL_ADDRESS set: aot-temporal present and
    the Temporal service answering (aot-temporal connects as a worker does:
    namespace, TLS and API key included);
  - with --online: one tiny request through each agent CLI, headless in an
    empty folder, which checks the login, the endpoint and the model name.

aot run does the quick part itself (each role's program, then its login as
a warning) and refuses to start, exit 2, when a program is missing; aot
worker does the same for the agents of its own flags.

Exit 0 when no check is an error (warnings allowed), 1 otherwise.
JSON: {success, error? (the first error), errors, warnings, checks: [{name,
level, detail, fix?}]}.`

func newCmdDoctor(d *deps, g *globalOptions, runF func(*doctorOptions) error) *cobra.Command {
	opts := &doctorOptions{IO: d.io, Global: g, getenv: d.getenv}
	cmd := &cobra.Command{
		Use:   "doctor [--agent A] [--role ROLE=AGENT[:MODEL]] [--agent-command CMD] [--worktree-dir DIR] [--engine local|temporal] [--online]",
		Short: "Check the agent CLIs, their logins, git, the folders and the sandbox before a run",
		Long:  doctorLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if opts.Agents.Command == "" {
				opts.Agents.Command = d.getenv("AOT_AGENT_COMMAND")
			}
			if opts.Engine != engineLocal && opts.Engine != engineTemporal {
				return usagef("--engine %q: choose local or temporal", opts.Engine)
			}
			if runF != nil {
				return runF(opts)
			}
			return doctorRun(cmd.Context(), opts)
		}),
	}
	f := cmd.Flags()
	addAgentFlags(f, &opts.Agents.Agent, &opts.Agents.Model, &opts.Agents.Roles, &opts.Agents.Command)
	f.StringVar(&opts.WorktreeDir, "worktree-dir", d.getenv("AOT_WORKTREE_DIR"), "the attempts' worktree folder to check (as aot run --worktree-dir; env AOT_WORKTREE_DIR)")
	f.BoolVar(&opts.Online, "online", false, "also send one tiny request through each agent CLI (costs a few tokens)")
	f.StringVar(&opts.Engine, "engine", engineLocal, "local, or temporal to check the Temporal service too (also checked when TEMPORAL_ADDRESS is set)")
	return cmd
}

type doctorDoc struct {
	Success  bool              `json:"success"`
	Error    string            `json:"error,omitempty"` // the first error and its fix
	Errors   int               `json:"errors"`
	Warnings int               `json:"warnings"`
	Checks   []preflight.Check `json:"checks"`
}

func doctorRun(ctx context.Context, opts *doctorOptions) error {
	env := preflight.System()
	checks := doctorChecks(ctx, opts, env)
	doc := doctorDoc{Checks: checks}
	for _, c := range checks {
		switch c.Level {
		case preflight.Error:
			if doc.Errors == 0 {
				doc.Error = c.String()
			}
			doc.Errors++
		case preflight.Warning:
			doc.Warnings++
		}
	}
	doc.Success = doc.Errors == 0
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, doc)
	} else {
		printChecks(opts.IO, checks)
		switch {
		case doc.Errors > 0:
			fmt.Fprintf(opts.IO.Out, "%s, %s: fix the errors before aot run\n", count(doc.Errors, "error"), count(doc.Warnings, "warning"))
		case doc.Warnings > 0:
			fmt.Fprintf(opts.IO.Out, "no errors, %s: aot run can start\n", count(doc.Warnings, "warning"))
		default:
			fmt.Fprintln(opts.IO.Out, "every check passed: aot run can start")
		}
	}
	if doc.Errors > 0 {
		return reported(exitFail)
	}
	return nil
}

// doctorChecks runs every check, in the order a person fixes them.
func doctorChecks(ctx context.Context, opts *doctorOptions, env preflight.Env) []preflight.Check {
	g := opts.Global
	var checks []preflight.Check
	stateExists := false
	switch s, err := g.store().Read(); {
	case errors.Is(err, state.ErrNotExist):
		checks = append(checks, preflight.Check{Name: "state file", Level: preflight.Warning,
			Detail: "none yet (" + g.StateFile + ")", Fix: "write one with aot init or aot align"})
	case err != nil:
		checks = append(checks, preflight.Check{Name: "state file", Level: preflight.Error, Detail: g.describe(err).Error(), Fix: "repair it (aot validate lists every error)"})
		stateExists = true
	default:
		stateExists = true
		if missing := s.Missing(); len(missing) > 0 {
			checks = append(checks, preflight.Check{Name: "state file", Level: preflight.Warning,
				Detail: g.StateFile + " is not ready to run: " + missing[0] + andMore(len(missing)-1), Fix: "aot gate lists what is missing"})
		} else {
			checks = append(checks, preflight.Check{Name: "state file", Level: preflight.OK, Detail: g.StateFile + " is ready to run"})
		}
	}
	root, err := g.projectRoot()
	if err != nil {
		root = "."
	}
	if _, cfg, err := buildAgents(g.StateFile, opts.Agents); err != nil {
		checks = append(checks, preflight.Check{Name: "agents", Level: preflight.Error, Detail: err.Error(), Fix: "aot help run explains the choice of agents"})
	} else {
		checks = append(checks, preflight.Programs(ctx, cfg, agent.Roles, root, env, true)...)
		checks = append(checks, preflight.Logins(cfg, agent.Roles, env)...)
		if opts.Online {
			checks = append(checks, preflight.Online(ctx, cfg, agent.Roles, env)...)
		}
	}
	checks = append(checks, preflight.Git(ctx, root, opts.WorktreeDir, env)...)
	if stateExists {
		checks = append(checks, preflight.Writable("state folder", filepath.Dir(g.StateFile), "the journal and the agent logs go there: make it writable for this user"))
	}
	checks = append(checks, preflight.Sandbox())
	if address := strings.TrimSpace(opts.getenv("TEMPORAL_ADDRESS")); address != "" || opts.Engine == engineTemporal {
		checks = append(checks, temporalEngineCheck(), temporalServiceCheck(ctx, address))
	}
	return checks
}

// printChecks prints one line per check and its fix below it.
func printChecks(io *streams, checks []preflight.Check) {
	for _, c := range checks {
		label := string(c.Level)
		switch c.Level {
		case preflight.OK:
			label = io.paint(styleGreen, "ok     ")
		case preflight.Warning:
			label = io.paint(styleYellow, "warning")
		case preflight.Error:
			label = io.paint(styleRed, "error  ")
		}
		fmt.Fprintf(io.Out, "%s  %s: %s\n", label, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(io.Out, "         fix: %s\n", c.Fix)
		}
	}
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// runRoles are the roles aot run and aot worker start (aot align has its
// own command).
func runRoles() []agent.Role {
	return slices.DeleteFunc(slices.Clone(agent.Roles), func(r agent.Role) bool { return r == agent.Align })
}

// preflightError is a start refused by the preflight: what is missing and
// how to fix it. It exits 2, as a bad --agent does.
type preflightError struct{ checks []preflight.Check }

func (e *preflightError) Error() string {
	var b strings.Builder
	b.WriteString("cannot start: ")
	for i, c := range e.checks {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c.Detail + "; " + c.Fix)
	}
	b.WriteString(" (aot doctor checks the whole setup)")
	return b.String()
}

// startPreflight is the quick check before a loop's agents may run: each
// role's program must be there (else the start is refused, exit 2); a login
// that cannot be found is a warning on stderr, since a key may come from
// where aot does not look.
func startPreflight(ctx context.Context, io *streams, cfg backend.Config, root string) error {
	env := preflight.System()
	var roles []agent.Role
	for _, r := range runRoles() {
		if s := cfg.For(r); s.Agent != "exec" || strings.TrimSpace(s.Command) != "" {
			roles = append(roles, r) // an exec agent without a command is the loop's to choose (aot worker)
		}
	}
	if errs := preflight.Errors(preflight.Programs(ctx, cfg, roles, root, env, false)); len(errs) > 0 {
		return &cmdError{code: exitUsage, err: &preflightError{errs}}
	}
	for _, c := range preflight.Logins(cfg, roles, env) {
		if c.Level != preflight.OK {
			fmt.Fprintf(io.ErrOut, "aot: warning: %s\n", c)
		}
	}
	return nil
}

// workerPreflight is startPreflight for aot worker: the agents its own
// flags and agents file choose (a loop may choose others).
func workerPreflight(ctx context.Context, io *streams, file backend.Config, flags agentChoice) error {
	cfg := file
	cfg.Roles = maps.Clone(file.Roles)
	if err := cfg.Override(flags.Agent, flags.Model, flags.Roles); err != nil {
		return usagef("%v", err)
	}
	setCommand(&cfg, flags.Command)
	wd, err := os.Getwd()
	if err != nil {
		wd = "."
	}
	return startPreflight(ctx, io, cfg, wd)
}
