package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/align"
	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

type alignOptions struct {
	IO           *streams
	Global       *globalOptions
	Request      string
	Yes          bool
	AnswersFile  string
	Force        bool
	Agent        string
	Model        string
	Roles        []string
	AgentCommand string
	// Interactive says the person is at a terminal (stdin is one).
	Interactive bool
	// Rounds bounds how often the model is asked again with answers.
	Rounds int

	agents agent.Agent
	// logDir holds the model's logs until the state is written (then they
	// move beside the journal): a failed align writes nothing under
	// .claude/aot-loop/.
	logDir string
}

const alignLong = `Agree with a model on what the loop must achieve, before any work starts
(the original /align-goal): the model reads the request (and may read the
project), asks what it must know, and proposes the background intent, the
deliverables, the scope, a base case of checks the loop runs itself, and the
first atoms with their dependencies. You answer its questions (the model is
asked again with your answers, at most 3 times in all), then review each
part: accept it (Enter), edit it (e: type a replacement line; in a list,
-N removes item N and +TEXT adds one, a check as [NAME=]TYPE:VALUE as aot
init takes it, an atom as +ID=DESCRIPTION, deps ID=A1,A2 sets its
dependencies), or send it back to the model with a comment (r).

The result must pass aot gate before it is written: when it does not, the
gate's reasons are shown and the model or you fix them. The state file is
written as aot init writes it; an existing one is only replaced with --force.
Scope, questions and answers are kept in the file's Markdown body.

Without a terminal: --yes accepts the model's proposal as it is, and
--answers FILE (YAML or JSON) answers its questions and replaces parts:
  answers: ["PostgreSQL", "no"]      # in the order asked, or {question: answer}
  goal: "..."                        # also background_intent, deliverables,
  atoms: [{id: A1, description: "...", depends_on: []}]   # definition_of_done,
  base_case: {checklist: [{item: tests, check: {type: command, value: make test}}]}
  scope: {in: ["..."], out: ["..."]}
A proposal that fails the gate is then an error (exit 1) and nothing is
written.

The model is the align role's agent: --agent, --model and --role
align=AGENT[:MODEL] as aot run takes them, or the agents file beside the state
file. The exec agent (--agent-command CMD) gets the task as JSON on stdin
({"role": "align", "request": ...}) and prints the proposal as one JSON object.

JSON (--json): {success, state_file, atoms: [id], objective: {goal,
background_intent, deliverables, definition_of_done, base_case, scope},
replaced?: {path, bytes}}; the dialogue then goes to stderr.`

func newCmdAlign(d *deps, g *globalOptions, runF func(*alignOptions) error) *cobra.Command {
	opts := &alignOptions{IO: d.io, Global: g, Interactive: isTerminal(d.io.In), Rounds: 3}
	cmd := &cobra.Command{
		Use:   "align [REQUEST] [--yes | --answers FILE] [--agent NAME] [--force]",
		Short: "Agree with a model on the objective and first atoms; write the state",
		Long:  alignLong,
		// Like aot init, aot align writes a new file where it is told to
		// (--state-file, AOT_STATE_FILE, else here): no search upwards.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error { return nil },
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.Request = strings.TrimSpace(strings.Join(args, " "))
			if opts.Yes && opts.AnswersFile != "" {
				return usagef("--yes and --answers exclude each other (--answers alone accepts what it does not replace)")
			}
			if !opts.Interactive && !opts.Yes && opts.AnswersFile == "" {
				return usagef("aot align is a dialogue and there is no terminal: give --yes to accept the model's proposal, or --answers FILE")
			}
			if opts.Request == "" && !opts.Interactive {
				return usagef("missing argument REQUEST: what the loop should achieve")
			}
			if opts.AgentCommand == "" {
				opts.AgentCommand = d.getenv("AOT_AGENT_COMMAND")
			}
			var err error
			opts.logDir = filepath.Join(os.TempDir(), fmt.Sprintf("aot-align-%d-%d", os.Getpid(), time.Now().UnixNano()))
			opts.agents, _, err = buildAgentsLogging(g.StateFile, agentChoice{Agent: opts.Agent, Model: opts.Model, Roles: opts.Roles, Command: opts.AgentCommand}, opts.logDir)
			if err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			return alignRun(ctx, opts)
		}),
	}
	f := cmd.Flags()
	addAgentFlags(f, &opts.Agent, &opts.Model, &opts.Roles, &opts.AgentCommand)
	f.BoolVarP(&opts.Yes, "yes", "y", false, "accept the model's proposal as it is (no terminal needed)")
	f.StringVar(&opts.AnswersFile, "answers", "", "answers and replaced parts from a YAML or JSON `file` (no terminal needed)")
	f.BoolVar(&opts.Force, "force", false, "replace an existing state file")
	return cmd
}

// isTerminal reports whether r is a terminal a person types into.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

type alignDoc struct {
	Success   bool             `json:"success"`
	StateFile string           `json:"state_file"`
	Atoms     []string         `json:"atoms"`
	Objective alignObjective   `json:"objective"`
	Replaced  *initReplacedDoc `json:"replaced,omitempty"`
}

// alignObjective is the written objective, as the model's format spells it.
type alignObjective struct {
	Goal             string         `json:"goal"`
	BackgroundIntent string         `json:"background_intent"`
	Deliverables     string         `json:"deliverables"`
	DefinitionOfDone string         `json:"definition_of_done"`
	BaseCase         align.BaseCase `json:"base_case"`
	Scope            align.Scope    `json:"scope"`
}

func alignRun(ctx context.Context, opts *alignOptions) (err error) {
	path := opts.Global.StateFile
	defer func() { err = keepAlignLogs(opts, err) }()
	// Refuse before asking the model; the store looks again when writing.
	if err := state.CheckPath(path); !errors.Is(err, state.ErrNotExist) {
		if err != nil {
			return err
		}
		if !opts.Force {
			return fmt.Errorf("%s already exists (use --force to replace it)", path)
		}
	}
	var answers *align.Answers
	if opts.AnswersFile != "" {
		data, err := os.ReadFile(opts.AnswersFile)
		if err != nil {
			return fmt.Errorf("read the answers: %w", err)
		}
		if answers, err = align.ParseAnswers(data); err != nil {
			return fmt.Errorf("%s: %w", opts.AnswersFile, err)
		}
	}
	root, err := opts.Global.projectRoot()
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	// The model works in the project's folder, made when the state file is
	// to be the first thing in it.
	if err := os.MkdirAll(root, journal.DirMode); err != nil {
		return err
	}
	model := &align.Model{Agent: opts.agents, Workdir: root, StateFile: abs}
	// With --json stdout holds only the document: the dialogue goes to stderr.
	talk := opts.IO.Out
	if opts.Global.JSON {
		talk = opts.IO.ErrOut
	}
	var out align.Outcome
	if opts.Yes || answers != nil {
		out, err = align.Auto(ctx, model, opts.Request, answers, opts.Rounds)
		if len(out.Open) > 0 && err == nil {
			fmt.Fprintf(opts.IO.ErrOut, "aot: the model's questions stay unanswered: %s\n", strings.Join(out.Open, " / "))
		}
	} else {
		in := bufio.NewReader(opts.IO.In)
		if opts.Request == "" {
			fmt.Fprint(talk, "What should the loop achieve? ")
			line, rerr := in.ReadString('\n')
			if opts.Request = strings.TrimSpace(line); opts.Request == "" {
				if rerr != nil {
					return errors.New("no request given: nothing written")
				}
				return usagef("missing argument REQUEST: what the loop should achieve")
			}
		}
		dlg := &align.Dialogue{Model: model, In: in, Out: talk, Rounds: opts.Rounds, Target: path}
		out, err = dlg.Run(ctx, opts.Request)
	}
	if err != nil {
		return err
	}
	replaced, err := opts.Global.store().CreateReplacing(out.State, opts.Force)
	if err != nil {
		if _, special := errors.AsType[*state.PathError](err); special && opts.Force {
			return fmt.Errorf("%w; --force replaces only a regular file", err)
		}
		return err
	}
	ids := make([]string, 0, len(out.State.Atoms))
	for _, a := range out.State.Atoms {
		ids = append(ids, a.ID)
	}
	if opts.Global.JSON {
		p := out.Proposal
		doc := alignDoc{Success: true, StateFile: abs, Atoms: ids, Objective: alignObjective{
			Goal: out.State.Objective.Goal, BackgroundIntent: out.State.Objective.BackgroundIntent,
			Deliverables: out.State.Objective.Deliverables, DefinitionOfDone: out.State.Objective.DefinitionOfDone,
			BaseCase: p.BaseCase, Scope: p.Scope,
		}}
		if replaced != nil {
			doc.Replaced = &initReplacedDoc{Path: replaced.Path, Bytes: replaced.Size}
		}
		writeJSON(opts.IO.Out, doc)
		return nil
	}
	if replaced != nil {
		fmt.Fprintf(opts.IO.Out, "replaced %s (a regular file of %d bytes)\n", replaced.Path, replaced.Size)
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s: %s, %s\n", path, brief.Count(len(out.State.Objective.BaseCase.Checklist), "check"), brief.Count(len(ids), "atom"))
	fmt.Fprintf(opts.IO.Out, "next: aot run%s\n", stateFileFlag(path))
	return nil
}

// keepAlignLogs moves the model's logs beside the journal once the state
// is written; when align failed they stay where they are, outside the
// project, and the error says where.
func keepAlignLogs(opts *alignOptions, err error) error {
	if opts.logDir == "" {
		return err
	}
	entries, rerr := os.ReadDir(opts.logDir)
	if rerr != nil || len(entries) == 0 {
		_ = os.Remove(opts.logDir)
		return err
	}
	if err != nil {
		return fmt.Errorf("%w (the model's log: %s)", err, filepath.Join(opts.logDir, entries[0].Name()))
	}
	dst := history.LogDir(opts.Global.StateFile)
	if merr := os.MkdirAll(dst, journal.DirMode); merr != nil {
		fmt.Fprintf(opts.IO.ErrOut, "aot: the model's log stays in %s: %v\n", opts.logDir, merr)
		return nil
	}
	for _, e := range entries {
		if merr := moveFile(filepath.Join(opts.logDir, e.Name()), filepath.Join(dst, e.Name())); merr != nil {
			fmt.Fprintf(opts.IO.ErrOut, "aot: the model's log stays in %s: %v\n", opts.logDir, merr)
			return nil
		}
	}
	_ = os.Remove(opts.logDir)
	return nil
}

// moveFile renames src to dst, copying when they are on two file systems.
func moveFile(src, dst string) error {
	if os.Rename(src, dst) == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, data, journal.FileMode); err != nil {
		return err
	}
	return os.Remove(src)
}
