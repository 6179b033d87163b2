package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/hooks"
)

const hookLong = `Answer a hook of Claude Code, Codex or Gemini CLI. The client's hook JSON
is read on stdin; the answer, in the client's own format, is printed on
stdout. The plugin written by aot plugin install calls:

  aot hook claude stop | subagent-stop | pre-tool-use
  aot hook codex stop | pre-tool-use
  aot hook gemini after-agent | before-tool

The continuation hook (claude stop and subagent-stop, codex stop, gemini
after-agent) keeps the session that owns the running loop working on it:
  - no decision (nothing printed) when stop_hook_active is true (a hook
    already kept the session going since the person's last prompt) and the
    session has resolved no atom since the previous stop, so a session can
    never be wedged (Claude Code keeps the flag set for every stop until
    the next prompt); when there is no state file, the hook's session did
    not start the loop (see Ownership), the loop is not running, aot run's
    engine is running it, a redirect is in progress, or (subagent-stop)
    the subagent is not the aot coordinator;
  - otherwise, under the state file's lock: a manual stop request stops the
    loop; iteration + 1; fewer unresolved atoms than at the previous stop is
    progress (stall_count 0), else stall_count + 1; when no atom is left aot
    runs the base case itself (an agent's word is never trusted): passed ->
    control completed and the session may end; max_iterations or
    max_stall_count reached -> control stopped with the reason, and the
    session may end, told why; else the session is kept going with the next
    executable atoms (at most 10 named), the failing checks, or the stall
    to break. A base-case check dies with its hook: SIGTERM, SIGINT or
    SIGHUP kill it and give no decision, and a guard process kills what is
    left if the hook itself is killed (SIGKILL included, on Linux).

The tool hook (claude and codex pre-tool-use, gemini before-tool) fails
closed: it approves a tool call only when the state file validates, the
loop is running, the hook's session owns it and the tool is within the
role: reading (Read, Grep, Glob, LS) for everyone; subagents (Agent, Task)
for the session and the aot coordinator; for the session and its workers,
writing inside the project (never .claude/, .git/ or the loop's files,
every symbolic link of the path followed, a dangling one to its target)
and shell commands that cannot touch .claude/ or the loop's files (read as
the shell reads them: quotes, variables, braces and globs; command
substitution, eval and the like are never approved); nothing more for the
aot probe, verifier, judge and planner. Every other case is no decision: the
client asks the person as usual. Codex 0.169 accepts no "allow" from
PreToolUse, so aot hook codex pre-tool-use never prints anything.

Ownership: the loop belongs to the session that started it, recorded in
.claude/aot-loop/session.json beside the journal by aot control status
running run from that session's shell tool (as /aot-loop:enter-recursion
does). Hooks never claim a loop: every other session's hooks, and all
hooks while aot run's engine holds the loop, leave it alone byte for byte.
A loop started outside any session has no owner. The owner is forgotten
when the loop stops or completes.

Output: block {"decision":"block","reason":R} (Claude adds a systemMessage
for the person); a loop that ends {"systemMessage":M}; Claude approval
{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":
"allow","permissionDecisionReason":R}}; Gemini approval
{"decision":"allow","reason":R}. Errors (an unreadable or invalid state
file, such as one whose iteration is not a number) give no decision: a
message on stderr and exit 0, never a block and never an approval. A
wrong CLIENT or EVENT is a usage error (exit 2).`

type hookOptions struct {
	IO        *streams
	Global    *globalOptions
	Client    hooks.Client
	Event     hooks.Event
	StateFile string // named by --state-file or AOT_STATE_FILE; "" to find it from the hook's cwd
	Getenv    func(string) string
	Getwd     func() (string, error)
	Argv0     string // the program as invoked: a hook's guard is started as the same command
}

func newCmdHook(d *deps, g *globalOptions, runF func(*hookOptions) error) *cobra.Command {
	opts := &hookOptions{IO: d.io, Global: g, Getenv: d.getenv, Getwd: d.getwd, Argv0: d.argv0}
	cmd := &cobra.Command{
		Use:   "hook CLIENT EVENT",
		Short: "Answer a Claude Code, Codex or Gemini CLI hook (JSON on stdin)",
		Long:  hookLong,
		Args:  chainArgs(exactArgs("CLIENT", "EVENT"), hookArgs),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.Client, opts.Event = hooks.Client(args[0]), hooks.Event(args[1])
			if flagChanged(cmd.Flags(), "state-file") || d.getenv(envStateFile) != "" {
				opts.StateFile = g.StateFile
			}
			if runF != nil {
				return runF(opts)
			}
			return hookRun(cmd.Context(), opts)
		}),
	}
	return cmd
}

// hookArgs checks CLIENT and EVENT against the hooks aot answers.
func hookArgs(cmd *cobra.Command, args []string) error {
	evs, ok := hooks.Events[hooks.Client(args[0])]
	if !ok {
		return usagef("invalid client %q (choose from \"claude\", \"codex\", \"gemini\")", args[0])
	}
	names := make([]string, len(evs))
	for i, e := range evs {
		if string(e) == args[1] {
			return nil
		}
		names[i] = string(e)
	}
	return usagef("invalid event %q for %s (choose from %s)", args[1], args[0], quotedList(names))
}

// hookRun answers the hook. It always exits 0: a client reads a non-zero
// exit as an error (exit 2 even as "block"), so an error is reported on
// stderr and gives no decision.
func hookRun(ctx context.Context, opts *hookOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if token := opts.Getenv(hooks.GuardEnv); token != "" {
		// This is the guard of a hook that runs a base-case check (see
		// hooks.Answer): it started as the same command.
		if hooks.RunGuard(opts.IO.In, token) != 0 {
			return reported(1)
		}
		return nil
	}
	in, err := hooks.ParseInput(opts.IO.In)
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "aot hook: %s; no decision\n", err)
		return nil
	}
	d, err := hooks.Answer(ctx, hooks.Options{
		Client: opts.Client, Event: opts.Event, StateFile: opts.StateFile,
		Getenv: opts.Getenv, Getwd: opts.Getwd,
	}, in, []string{opts.Argv0, "hook", string(opts.Client), string(opts.Event)})
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "aot hook: %s; no decision\n", strings.TrimSpace(describeReadError(err).Error()))
		if d.Action == hooks.Allow {
			return nil
		}
	}
	if out := hooks.Render(opts.Client, opts.Event, d); out != nil {
		_, _ = opts.IO.Out.Write(out)
	}
	return nil
}
