// Package cli is the aot command line: one cobra command per operation, each
// an Options struct, a NewCmdX that only maps flags to options, and an xRun
// that does the work through injected streams.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/state"
)

// Exit codes shared by every command.
const (
	exitOK    = 0 // success, passed, ready, valid
	exitFail  = 1 // the operation failed, a check did not pass, not ready, invalid, missing file
	exitUsage = 2 // unknown command, missing or bad argument or flag
)

// envStateFile names the state file when --state-file is not given.
const envStateFile = "AOT_STATE_FILE"

// deps is everything a command needs from the outside world.
type deps struct {
	io      *streams
	getenv  func(string) string
	now     func() time.Time
	version string
	self    string // the path that runs this program again (aot demo's agent)
	argv0   string // the program as it was invoked, for commands a person copies
	// args is the command line without the program's name, as run got it:
	// what aot run --detach and the hand-over to aot-temporal run again.
	args  []string
	getwd func() (string, error)
}

// Main runs the aot command line with args (without the program name) and
// returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	tuneGC(args, os.Getenv)
	d := &deps{
		io:      newStreams(stdin, stdout, stderr, os.Getenv),
		getenv:  os.Getenv,
		now:     time.Now,
		version: buildVersion(),
		self:    selfPath(),
		argv0:   os.Args[0],
		getwd:   os.Getwd,
	}
	return run(context.Background(), d, args)
}

func run(ctx context.Context, d *deps, args []string) int {
	if args == nil {
		args = []string{} // nil makes cobra read os.Args
	}
	withArgs := *d
	withArgs.args = args
	root := newCmdRootFor(&withArgs, calledCommand(d, args))
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	jsonOut := wantsJSON(cmd, args)
	var ce *cmdError
	if !errors.As(err, &ce) {
		// Anything cobra refused before a command ran: unknown command,
		// bad flag, wrong number of arguments, a value outside an enum.
		fmt.Fprintf(d.io.ErrOut, "aot: %s\nRun '%s' for usage.\n", err, helpFor(cmd))
		if jsonOut {
			writeJSON(d.io.Out, failure{Error: sentence(err)})
		}
		return exitUsage
	}
	if ce.reported {
		return ce.code
	}
	if jsonOut {
		writeJSON(d.io.Out, failure{Error: sentence(ce.err), Code: failureCode(ce.err)})
	} else {
		fmt.Fprintf(d.io.ErrOut, "aot: %s\n", ce.err)
	}
	return ce.code
}

// helpFor is the command line that prints cmd's help: "aot help run", or
// "aot help" for the root.
func helpFor(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return "aot help"
	}
	return "aot help " + strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// cmdError is an error from a command's run function, carrying its exit code.
// Every error a run function returns is wrapped into one, so that any other
// error reaching run is one of cobra's usage errors.
type cmdError struct {
	code     int
	err      error
	reported bool // the command already printed its own output for it
}

func (e *cmdError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *cmdError) Unwrap() error { return e.err }

// usageError marks a bad argument found by a run function.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// reported is returned when the command printed its own output (a JSON
// document or a report) and only the exit code is left to set.
func reported(code int) error { return &cmdError{code: code, reported: true} }

// runE adapts a run function to cobra: a usageError stays a usage error,
// anything else becomes an operation failure (exit 1).
func runE(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		if err == nil {
			return nil
		}
		var ue *usageError
		if errors.As(err, &ue) {
			return ue
		}
		var ce *cmdError
		if errors.As(err, &ce) {
			return ce
		}
		return &cmdError{code: exitFail, err: err}
	}
}

// wantsJSON reports whether --json was given, even when flag parsing failed
// before cobra could record it.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if f := cmd.Flags().Lookup("json"); f != nil && f.Changed {
		return f.Value.String() == "true"
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" || a == "--json=1" {
			return true
		}
	}
	return false
}

// sentence renders an error as the human sentence of a JSON error document.
func sentence(err error) string {
	return strings.TrimSpace(err.Error())
}

// tuneGC trades memory the process may use anyway for time. A state
// command reads one file, answers and exits: the collector stays off until
// the heap reaches 14x the file's size (at least 48 MB), a soft limit within
// the memory target of 20x the file size; below it no time goes to
// collection at all. The loop's long-running commands keep the defaults, and
// GOGC or GOMEMLIMIT in the environment win.
func tuneGC(args []string, getenv func(string) string) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return
	}
	path := getenv(envStateFile)
	if path == "" {
		path = state.DefaultPath
		if wd, err := os.Getwd(); err == nil {
			if found, ok := state.Find(wd); ok {
				path = found
			}
		}
	}
	command := ""
	for i, a := range args {
		if a == "--" {
			break
		}
		switch v, ok := strings.CutPrefix(a, "--state-file="); {
		case ok:
			path = v
		case a == "--state-file" && i+1 < len(args):
			path = args[i+1]
		case command == "" && !strings.HasPrefix(a, "-") && (i == 0 || args[i-1] != "--state-file"):
			command = a
		}
	}
	switch command {
	case "run", "demo", "demo-agent", "status":
		return
	}
	limit := int64(48 << 20)
	if fi, err := os.Stat(path); err == nil && 14*fi.Size() > limit {
		limit = 14 * fi.Size()
	}
	debug.SetMemoryLimit(limit)
	debug.SetGCPercent(-1)
}
