package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aot-loop/aot/internal/state"
)

// globalOptions are the persistent flags every command takes.
type globalOptions struct {
	StateFile string
	JSON      bool
}

func (g *globalOptions) store() *state.Store { return state.NewStore(g.StateFile) }

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

Every command takes --state-file PATH (default $AOT_STATE_FILE, else
.claude/aot-loop-state.md, relative to the working directory) and --json.
With --json, stdout holds exactly one JSON document, errors included:
{"success": false, "error": "..."} unless the command documents its own shape.

Exit codes: 0 success, passed, ready or valid; 1 the operation failed, a check
did not pass, the gate is not ready, the state is invalid or missing;
2 usage error (unknown command, missing or bad argument or flag). aot run
and aot demo add one code per stop reason (see aot help run).`

func newCmdRoot(d *deps) *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:           "aot",
		Short:         "Run and inspect an AoT Loop",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing command")
		},
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetIn(d.io.In)
	root.SetOut(d.io.Out)
	root.SetErr(d.io.ErrOut)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &usageError{err.Error()} })

	def := d.getenv(envStateFile)
	if def == "" {
		def = state.DefaultPath
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.StateFile, "state-file", def, "state file `path` (env "+envStateFile+")")
	pf.BoolVar(&g.JSON, "json", false, "print one JSON document on stdout")

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
	for _, c := range []*cobra.Command{
		newCmdRun(d, g, nil),
		newCmdStop(d, g, nil),
		newCmdRedirect(d, g, nil),
		newCmdStatus(d, g, nil),
		newCmdDemo(d, g, nil),
	} {
		c.GroupID = "loop"
		root.AddCommand(c)
	}
	root.AddCommand(newCmdVersion(d, g), newCmdDemoAgent(d))
	return root
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
		return nil, describeReadError(err)
	}
	return s, nil
}

// describeReadError makes the store's errors read as sentences.
func describeReadError(err error) error {
	var pe *state.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot parse state file: %w", err)
	}
	return err
}
