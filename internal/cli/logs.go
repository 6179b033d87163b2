package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
)

type logsOptions struct {
	IO      *streams
	Global  *globalOptions
	Atom    string
	Follow  bool
	Role    string
	Attempt int
	Poll    time.Duration // how often --follow looks for news
}

const logsLong = `Show what agents printed: the log kept of each attempt (its stderr, then
the first 64 KiB of its stdout, from .claude/aot-loop/logs/), each under a
header naming the atom, the role, the attempt and its outcome from the
journal: ok, or failed with the reason (which quotes the start of what the
agent printed), reset (killed by a stop, a redirect or a usage limit),
running, or unfinished (its engine ended without an outcome). A loop on
Temporal: what the workers sent of each attempt, the last 64 KiB of it
after a line saying how much was cut.

With ATOM: every attempt of that atom, in the order they ran. Without: the
latest attempt of every atom (each role that ran under that attempt
number). --role keeps one role (worker, probe, planner, judge); --attempt N
shows attempt N instead of the latest. The planner and judge runs of the
base case appear as the atom base_case.

--follow keeps printing, like tail -f: new output of the attempts shown,
new attempts as they start (a header before each), and each outcome as it
is journaled, until the running engine stops or Ctrl-C. Without a running
engine there is nothing to follow: it prints what there is, says so on
stderr and ends.

JSON (not with --follow): {attempts: [{atom, role, attempt, outcome,
reason, started, duration_ms, log_file, log}], skipped_journal_lines:
[{path, line, error}]}.`

func newCmdLogs(d *deps, g *globalOptions, runF func(*logsOptions) error) *cobra.Command {
	opts := &logsOptions{IO: d.io, Global: g, Poll: 100 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "logs [ATOM] [--follow] [--role R] [--attempt N]",
		Short: "What the agents printed, attempt by attempt, with each outcome",
		Long:  logsLong,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("unexpected argument %q (one atom at most)", args[1])
			}
			return nil
		},
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Atom = args[0]
			}
			if opts.Role != "" && !slices.Contains(history.Roles, opts.Role) {
				return usagef("invalid role %q (choose from %s)", opts.Role, quotedList(history.Roles))
			}
			if opts.Attempt < 0 || flagChanged(cmd.Flags(), "attempt") && opts.Attempt == 0 {
				return usagef("--attempt must be 1 or more")
			}
			if opts.Follow && opts.Global.JSON {
				return usagef("--follow prints as it goes; --json gives one document: use one of them")
			}
			if runF != nil {
				return runF(opts)
			}
			return logsRun(cmd.Context(), opts)
		}),
	}
	f := cmd.Flags()
	f.BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new output and new attempts until the engine stops or Ctrl-C")
	f.StringVar(&opts.Role, "role", "", "only this role's runs: worker, probe, planner or judge")
	f.IntVar(&opts.Attempt, "attempt", 0, "attempt `N` instead of the latest")
	return cmd
}

type logsDoc struct {
	Attempts []*history.Attempt `json:"attempts"`
	Skipped  []journal.Skipped  `json:"skipped_journal_lines"`
}

// match says whether an attempt passes the atom and role filters.
func (o *logsOptions) match(a *history.Attempt) bool {
	if o.Atom != "" && a.Atom != o.Atom && a.Atom != history.SafeName(o.Atom) {
		return false
	}
	if o.Role != "" && a.Role != o.Role {
		return false
	}
	return o.Attempt == 0 || a.Attempt == o.Attempt
}

// selectAttempts picks what to show: every matching attempt of the atom
// given, or the latest attempt number of every atom.
func (o *logsOptions) selectAttempts(all []*history.Attempt) []*history.Attempt {
	var out []*history.Attempt
	latest := map[string]int{}
	for _, a := range all {
		if o.match(a) {
			out = append(out, a)
			latest[a.Atom] = max(latest[a.Atom], a.Attempt)
		}
	}
	if o.Atom != "" || o.Attempt != 0 {
		return out
	}
	return slices.DeleteFunc(out, func(a *history.Attempt) bool { return a.Attempt != latest[a.Atom] })
}

func logsRun(ctx context.Context, opts *logsOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// The journal sits beside the state file: a path that is no file is
	// refused as every command refuses it (a missing state file is not: its
	// journal and logs may outlive it).
	if err := state.CheckPath(opts.Global.StateFile); err != nil && !errors.Is(err, state.ErrNotExist) {
		return err
	}
	path := journal.PathFor(opts.Global.StateFile)
	book := history.NewBook(opts.Global.StateFile)
	fol := journal.NewFollower(path)
	events, skipped, err := fol.Next()
	if err != nil {
		return err
	}
	warnSkipped(opts.IO, skipped)
	for _, ev := range events {
		book.Add(ev)
	}
	book.AddOrphanLogs()
	shown := opts.selectAttempts(book.Attempts())
	if !opts.Follow {
		for _, a := range shown {
			if data, err := os.ReadFile(a.LogFile); err == nil {
				a.Log = string(data)
			} else {
				a.LogFile = ""
			}
		}
		if opts.Global.JSON {
			doc := logsDoc{Attempts: shown, Skipped: skipped}
			if doc.Attempts == nil {
				doc.Attempts = []*history.Attempt{}
			}
			if doc.Skipped == nil {
				doc.Skipped = []journal.Skipped{}
			}
			writeJSON(opts.IO.Out, doc)
			return nil
		}
		if len(shown) == 0 {
			return noAttempts(opts, len(events) > 0 || len(book.Attempts()) > 0)
		}
		for i, a := range shown {
			if i > 0 {
				fmt.Fprintln(opts.IO.Out)
			}
			fmt.Fprintln(opts.IO.Out, opts.header(a))
			if a.LogFile == "" {
				fmt.Fprintln(opts.IO.Out, "(no log kept)")
				continue
			}
			fmt.Fprint(opts.IO.Out, a.Log)
			if a.Log != "" && !strings.HasSuffix(a.Log, "\n") {
				fmt.Fprintln(opts.IO.Out)
			}
		}
		return nil
	}
	return followLogs(ctx, opts, book, fol, shown)
}

func noAttempts(opts *logsOptions, anyAttempts bool) error {
	what := "no agent has run yet"
	switch {
	case !anyAttempts:
		if _, err := os.Stat(journal.PathFor(opts.Global.StateFile)); err != nil {
			what += fmt.Sprintf(" (no journal at %s: aot run starts the loop)", journal.PathFor(opts.Global.StateFile))
		}
	default:
		var filter []string
		if opts.Atom != "" {
			filter = append(filter, "atom "+opts.Atom)
		}
		if opts.Role != "" {
			filter = append(filter, "role "+opts.Role)
		}
		if opts.Attempt != 0 {
			filter = append(filter, "attempt "+strconv.Itoa(opts.Attempt))
		}
		what = "no attempts of " + strings.Join(filter, ", ") + " in the journal"
	}
	if opts.Atom != "" || opts.Attempt != 0 {
		return errors.New(what)
	}
	fmt.Fprintln(opts.IO.Out, what)
	return nil
}

// header names an attempt and its outcome.
func (o *logsOptions) header(a *history.Attempt) string {
	out := a.Outcome
	switch a.Outcome {
	case "ok":
		out = o.IO.paint(styleGreen, "ok")
	case "failed", "reset":
		out = o.IO.paint(styleRed, a.Outcome)
	case "running":
		out = o.IO.paint(styleCyan, "running")
	}
	if a.Reason != "" {
		out += ": " + dag.OneLine(a.Reason, 1000)
	}
	if a.DurationMS > 0 && a.Outcome != "running" {
		out += fmt.Sprintf(" (%s)", (time.Duration(a.DurationMS) * time.Millisecond).String())
	}
	return o.IO.paint(styleBold, fmt.Sprintf("=== %s %s attempt %d:", a.Atom, a.Role, a.Attempt)) + " " + out
}

// followLogs prints as tail -f does: the attempts shown so far with their
// logs, then whatever comes, until the engine it watched stops.
func followLogs(ctx context.Context, opts *logsOptions, book *history.Book, fol *journal.Follower, shown []*history.Attempt) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	out := opts.IO.Out
	tracked := append([]*history.Attempt{}, shown...)
	printed := map[*history.Attempt]int64{} // bytes of its log printed so far
	done := map[*history.Attempt]bool{}     // its outcome was printed
	var last *history.Attempt               // whose output was printed last
	printHeader := func(a *history.Attempt) {
		if last != nil {
			fmt.Fprintln(out)
		}
		fmt.Fprintln(out, opts.header(a))
		last = a
	}
	// drain prints what was added to an attempt's log since the last look.
	drain := func(a *history.Attempt) {
		data, err := readFrom(a.LogFile, printed[a])
		if err != nil || len(data) == 0 {
			return
		}
		if last != a {
			// Output of another attempt came in between: say whose this is.
			if last != nil {
				fmt.Fprintln(out)
			}
			fmt.Fprintln(out, opts.IO.paint(styleBold, fmt.Sprintf("=== %s %s attempt %d", a.Atom, a.Role, a.Attempt)))
			last = a
		}
		printed[a] += int64(len(data))
		_, _ = out.Write(data)
	}
	finished := func(a *history.Attempt) bool { return a.Outcome != "running" }
	for _, a := range tracked {
		printHeader(a)
		drain(a)
		done[a] = finished(a)
	}
	if _, engine, _ := runlock.Holder(opts.Global.StateFile); !engine {
		fmt.Fprintln(opts.IO.ErrOut, "aot: no engine is running, nothing to follow (aot run starts one)")
		return nil
	}
	tick := time.NewTicker(opts.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		events, skipped, err := fol.Next()
		if err != nil {
			return err
		}
		warnSkipped(opts.IO, skipped)
		stopped := false
		for _, ev := range events {
			if ev.Type == journal.Stop {
				stopped = true
			}
			a := book.Add(ev)
			if a != nil && ev.Type == journal.AtomStart && opts.match(a) && !slices.Contains(tracked, a) {
				tracked = append(tracked, a)
				printHeader(a)
				done[a] = false
			}
		}
		for _, a := range tracked {
			drain(a)
			if !done[a] && finished(a) {
				// The log is complete once the outcome is journaled.
				drain(a)
				done[a] = true
				printHeader(a)
			}
		}
		if stopped {
			return nil
		}
		if _, engine, _ := runlock.Holder(opts.Global.StateFile); !engine {
			// The engine is gone without a stop line (a crash): one last look.
			events, _, _ := fol.Next()
			for _, ev := range events {
				book.Add(ev)
			}
			for _, a := range tracked {
				drain(a)
			}
			return nil
		}
	}
}

// readFrom returns the bytes of path from offset on (nothing when it does
// not exist yet).
func readFrom(path string, offset int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= offset {
		return nil, err
	}
	data := make([]byte, fi.Size()-offset)
	n, err := f.ReadAt(data, offset)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return data[:n], nil
}
