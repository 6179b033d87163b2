package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// globalOptions are the persistent flags every command takes.
type globalOptions struct {
	StateFile string
	JSON      bool
	// searched is the directory the search for a state file started from
	// when none was found in it or above it ("" when the path was given or
	// found): a missing file is then explained as a failed search.
	searched string
}

// store is the state file's store for a person's command: its updates
// refuse a file that does not validate, leaving it byte-identical.
func (g *globalOptions) store() *state.Store { return state.NewStore(g.StateFile).RefuseInvalid() }

// resolveStateFile picks the state file when neither --state-file nor
// AOT_STATE_FILE names one: the first .claude/aot-loop-state.md in the
// working directory or a parent, as git finds .git. One in the working
// directory keeps the short relative path; one above it is named by its
// absolute path.
func (g *globalOptions) resolveStateFile(explicit bool, getwd func() (string, error)) {
	if explicit {
		return
	}
	if getwd == nil {
		getwd = os.Getwd
	}
	wd, err := getwd()
	if err != nil {
		return // the relative default then fails with its own message
	}
	found, ok := state.Find(wd)
	switch {
	case !ok:
		g.searched = wd
	case found != filepath.Join(wd, state.DefaultPath):
		g.StateFile = found
	}
}

// noStateFileError is a search for the state file that found none.
type noStateFileError struct{ dir string }

func (e *noStateFileError) Error() string {
	return fmt.Sprintf("no state file: there is no %s in %s or any directory above it; create one with aot init (aot help init), or name one with --state-file or %s", state.DefaultPath, e.dir, envStateFile)
}

func (e *noStateFileError) Unwrap() error { return state.ErrNotExist }

// describe makes a read or write error of the state file read as a sentence:
// a missing file found by no search says where it was looked for.
func (g *globalOptions) describe(err error) error {
	if g.searched != "" && errors.Is(err, state.ErrNotExist) {
		return &noStateFileError{dir: g.searched}
	}
	return describeReadError(err)
}

// projectRoot is the directory the loop works in: the parent of the state
// file's `.claude/` directory, or the state file's own directory when it does
// not live in a `.claude/` directory.
func (g *globalOptions) projectRoot() (string, error) {
	abs, err := filepath.Abs(g.StateFile)
	if err != nil {
		return "", fmt.Errorf("resolve state file path: %w", err)
	}
	dir := filepath.Dir(abs)
	if filepath.Base(dir) == ".claude" {
		return filepath.Dir(dir), nil
	}
	return dir, nil
}

const rootLong = `aot runs the AoT Loop: an objective with a verifiable base case, a work graph
of atoms, and a loop of agents that resolves them. These commands read and
change the state file (.claude/aot-loop-state.md) safely: every change is
made under a lock, validated, and written atomically, so a refused or failed
change leaves the file byte-identical.

Every command takes --state-file PATH and --json. Without --state-file or
$AOT_STATE_FILE, aot uses the first .claude/aot-loop-state.md in the working
directory or a directory above it, as git finds .git; aot init writes a new
one in the working directory.
With --json, stdout holds exactly one JSON document, errors included:
{"success": false, "error": "..."} unless the command documents its own shape.

Exit codes: 0 success, passed, ready or valid; 1 the operation failed, a check
did not pass, the gate is not ready, the state is invalid or missing;
2 usage error (unknown command, missing or bad argument or flag). aot run
and aot demo add one code per stop reason (see aot help run).`

func newCmdRoot(d *deps) *cobra.Command { return newCmdRootFor(d, "") }

// newCmdRootFor builds the command tree with only the command named only
// below the root (every command when only is ""): building them all is a
// quarter of a millisecond of every start, and the state commands run on
// every hook and tool call.
func newCmdRootFor(d *deps, only string) *cobra.Command {
	g := &globalOptions{}
	var showVersion bool
	root := &cobra.Command{
		Use:           "aot",
		Short:         "Run and inspect an AoT Loop",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if showVersion {
				return printVersion(d, g)
			}
			return usagef("missing command")
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Name() != "init" {
				g.resolveStateFile(flagChanged(cmd.Flags(), "state-file") || d.getenv(envStateFile) != "", d.getwd)
			}
			return nil
		},
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetIn(d.io.In)
	root.SetOut(d.io.Out)
	root.SetErr(d.io.ErrOut)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &usageError{err.Error()} })
	// Help is a path of every command too: with --json it is one document.
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		if !g.JSON {
			defaultHelp(c, args)
			return
		}
		var buf bytes.Buffer
		c.SetOut(&buf)
		defaultHelp(c, args)
		c.SetOut(nil)
		root.SetOut(d.io.Out)
		writeJSON(d.io.Out, helpDoc{Command: c.CommandPath(), Help: buf.String()})
	})

	def := d.getenv(envStateFile)
	if def == "" {
		def = state.DefaultPath
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.StateFile, "state-file", def, "state file `path` (env "+envStateFile+"; else the first "+state.DefaultPath+" here or in a parent directory)")
	pf.BoolVar(&g.JSON, "json", false, "print one JSON document on stdout")
	root.Flags().BoolVar(&showVersion, "version", false, "print the aot version (as aot version)")

	root.AddGroup(
		&cobra.Group{ID: "state", Title: "State operations:"},
		&cobra.Group{ID: "loop", Title: "The loop:"},
	)
	for _, c := range commands(d, g) {
		if only != "" && c.name != only {
			continue
		}
		cmd := c.make()
		cmd.GroupID = c.group
		root.AddCommand(cmd)
	}
	return root
}

// command is one of aot's commands, made only when it is the one called.
type command struct {
	name, group string
	make        func() *cobra.Command
}

// commands are aot's commands in the order help lists them.
func commands(d *deps, g *globalOptions) []command {
	inState := func(name string, mk func() *cobra.Command) command { return command{name, "state", mk} }
	inLoop := func(name string, mk func() *cobra.Command) command { return command{name, "loop", mk} }
	apart := func(name string, mk func() *cobra.Command) command { return command{name, "", mk} }
	return []command{
		inState("state", func() *cobra.Command { return newCmdState(d, g, nil) }),
		inState("validate", func() *cobra.Command { return newCmdValidate(d, g, nil) }),
		inState("gate", func() *cobra.Command { return newCmdGate(d, g, nil) }),
		inState("init", func() *cobra.Command { return newCmdInit(d, g, nil) }),
		inState("atom", func() *cobra.Command { return newCmdAtom(d, g) }),
		inState("bind", func() *cobra.Command { return newCmdBind(d, g, nil) }),
		inState("or", func() *cobra.Command { return newCmdOr(d, g) }),
		inState("control", func() *cobra.Command { return newCmdControl(d, g) }),
		inState("verify", func() *cobra.Command { return newCmdVerify(d, g, nil) }),
		inLoop("align", func() *cobra.Command { return newCmdAlign(d, g, nil) }),
		inLoop("doctor", func() *cobra.Command { return newCmdDoctor(d, g, nil) }),
		// aot run and aot stop look at the state file first: a missing or
		// invalid one is refused here, before the run lock or the
		// aot-loop/ folder exist.
		inLoop("run", func() *cobra.Command {
			var runCmd *cobra.Command
			runCmd = newCmdRun(d, g, func(opts *runOptions) error {
				if err := checkRunnable(g); err != nil {
					return err
				}
				return runRun(runCmd.Context(), opts)
			})
			return runCmd
		}),
		inLoop("stop", func() *cobra.Command {
			stopCmd := newCmdStop(d, g, nil)
			stopCmd.PreRunE = runE(func(cmd *cobra.Command, args []string) error {
				_, err := readState(g)
				return err
			})
			return stopCmd
		}),
		inLoop("pause", func() *cobra.Command { return newCmdPause(d, g, nil) }),
		inLoop("resume", func() *cobra.Command { return newCmdResume(d, g, nil) }),
		inLoop("redirect", func() *cobra.Command { return newCmdRedirect(d, g, nil) }),
		inLoop("status", func() *cobra.Command { return newCmdStatus(d, g, nil) }),
		inLoop("graph", func() *cobra.Command { return newCmdGraph(d, g, nil) }),
		inLoop("top", func() *cobra.Command { return newCmdTop(d, g, nil) }),
		inLoop("logs", func() *cobra.Command { return newCmdLogs(d, g, nil) }),
		inLoop("demo", func() *cobra.Command { return newCmdDemo(d, g, nil) }),
		inLoop("plugin", func() *cobra.Command { return newCmdPlugin(d, g) }),
		inLoop("serve", func() *cobra.Command { return newCmdServe(d, g, nil) }),
		inLoop("worker", func() *cobra.Command { return newCmdWorker(d, g, nil) }),
		inLoop("codec-server", func() *cobra.Command { return newCmdCodecServer(d, g, nil) }),
		inLoop("workflow-call", func() *cobra.Command { return newCmdWorkflowCall(d, g) }),
		apart("version", func() *cobra.Command { return newCmdVersion(d, g) }),
		apart("demo-agent", func() *cobra.Command { return newCmdDemoAgent(d) }),
		apart(confine.Command, func() *cobra.Command { return newCmdAgentGuard() }),
		apart("hook", func() *cobra.Command { return newCmdHook(d, g, nil) }),
	}
}

// calledCommand is the command args name below the root ("" when they name
// none, or when what they name is not one of aot's commands: then the whole
// tree is built, for help and cobra's suggestions).
func calledCommand(d *deps, args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--state-file":
			i++
		case strings.HasPrefix(a, "--state-file=") || a == "--json" || a == "--json=true" || a == "--json=false":
		case strings.HasPrefix(a, "-"):
			return ""
		default:
			for _, c := range commands(d, &globalOptions{}) {
				if c.name == a {
					return a
				}
			}
			return ""
		}
	}
	return ""
}

// helpDoc is aot help's JSON document: the command and its help text.
type helpDoc struct {
	Command string `json:"command"`
	Help    string `json:"help"`
}

// newGroupCmd is a command that only holds subcommands: run alone it is a
// usage error, and an unknown subcommand is one too.
func newGroupCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing subcommand for %q", cmd.CommandPath())
		},
	}
}

// exactArgs is cobra.ExactArgs with a message that names the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return usagef("missing argument %s", names[len(args)])
		}
		if len(args) > len(names) {
			return usagef("unexpected argument %q", args[len(names)])
		}
		return nil
	}
}

// oneOfArg checks that the argument at index i is one of allowed.
func oneOfArg(i int, name string, allowed ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if i >= len(args) {
			return nil
		}
		for _, a := range allowed {
			if args[i] == a {
				return nil
			}
		}
		return usagef("invalid %s %q (choose from %s)", name, args[i], quotedList(allowed))
	}
}

func chainArgs(checks ...cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		for _, c := range checks {
			if err := c(cmd, args); err != nil {
				return err
			}
		}
		return nil
	}
}

func quotedList(list []string) string {
	s := ""
	for i, v := range list {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q", v)
	}
	return s
}

// flagChanged reports whether the named flag was given on the command line.
func flagChanged(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.Changed
}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// readState reads the state file for a read-only command.
func readState(g *globalOptions) (*state.State, error) {
	s, err := g.store().Read()
	if err != nil {
		return nil, g.describe(err)
	}
	return s, nil
}

// readShown is readState for the commands that show the state to a person
// (aot state, aot status): a file that does not validate is still shown, with
// a warning on stderr naming its first error and line, and so is a file
// with atom ids outside the safe set.
func readShown(io *streams, g *globalOptions) (*state.State, error) {
	s, r, err := g.store().ReadReport()
	if err != nil {
		return nil, g.describe(err)
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(io.ErrOut, "aot: warning: %s does not validate: %s%s; changes to it are refused until it is repaired (aot validate lists every error)\n",
			g.StateFile, r.Errors[0], andMore(len(r.Errors)-1))
	}
	var ids []state.Issue
	for _, w := range r.Warnings {
		if strings.HasSuffix(w.Field, ".id") {
			ids = append(ids, w)
		}
	}
	if len(ids) > 0 {
		fmt.Fprintf(io.ErrOut, "aot: warning: %s%s\n", ids[0], andMore(len(ids)-1))
	}
	return s, nil
}

func andMore(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n)
}

// checkRunnable refuses to start a loop on a state file that is missing,
// unreadable or not ready, before anything is created beside it.
func checkRunnable(g *globalOptions) error {
	s, err := readState(g)
	if err != nil {
		return err
	}
	if missing := s.Missing(); len(missing) > 0 {
		return &engine.NotReadyError{Missing: missing}
	}
	return nil
}

// describeReadError makes the store's errors read as sentences.
func describeReadError(err error) error {
	var pe *state.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot parse state file: %w", err)
	}
	return err
}
