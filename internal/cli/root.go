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

func newCmdRoot(d *deps) *cobra.Command {
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
	)
	for _, c := range []*cobra.Command{
		newCmdState(d, g, nil),
		newCmdValidate(d, g, nil),
		newCmdGate(d, g, nil),
		newCmdInit(d, g, nil),
		newCmdAtom(d, g),
		newCmdBind(d, g, nil),
		newCmdOr(d, g),
		newCmdControl(d, g),
		newCmdVerify(d, g, nil),
	} {
		c.GroupID = "state"
		root.AddCommand(c)
	}
	root.AddGroup(&cobra.Group{ID: "loop", Title: "The loop:"})
	// aot run and aot stop (their own file, run.go) look at the state file
	// first: a missing or invalid one is refused here, before the run lock
	// or the aot-loop/ folder exist.
	var runCmd *cobra.Command
	runCmd = newCmdRun(d, g, func(opts *runOptions) error {
		if err := checkRunnable(g); err != nil {
			return err
		}
		return runRun(runCmd.Context(), opts)
	})
	stopCmd := newCmdStop(d, g, nil)
	stopCmd.PreRunE = runE(func(cmd *cobra.Command, args []string) error {
		_, err := readState(g)
		return err
	})
	for _, c := range []*cobra.Command{
		newCmdAlign(d, g, nil),
		newCmdDoctor(d, g, nil),
		runCmd,
		stopCmd,
		newCmdPause(d, g, nil),
		newCmdResume(d, g, nil),
		newCmdRedirect(d, g, nil),
		newCmdStatus(d, g, nil),
		newCmdGraph(d, g, nil),
		newCmdTop(d, g, nil),
		newCmdLogs(d, g, nil),
		newCmdDemo(d, g, nil),
		newCmdPlugin(d, g),
		newCmdServe(d, g, nil),
		newCmdWorker(d, g, nil),
		newCmdCodecServer(d, g, nil),
		newCmdWorkflowCall(d, g),
	} {
		c.GroupID = "loop"
		root.AddCommand(c)
	}
	root.AddCommand(newCmdVersion(d, g), newCmdDemoAgent(d), newCmdAgentGuard())
	root.AddCommand(newCmdHook(d, g, nil))
	return root
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
