package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/agent"
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
running, or unfinished (its engine ended without an outcome).

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
			if opts.Role != "" && !slices.Contains(logRoles, opts.Role) {
				return usagef("invalid role %q (choose from %s)", opts.Role, quotedList(logRoles))
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

var logRoles = []string{string(agent.Worker), string(agent.Probe), string(agent.Planner), string(agent.Judge)}

// attemptDoc is one run of an agent on an atom and what it printed.
type attemptDoc struct {
	Atom       string     `json:"atom"`
	Role       string     `json:"role"`
	Attempt    int        `json:"attempt"`
	Outcome    string     `json:"outcome"` // ok, failed, reset, running, unfinished, unknown
	Reason     string     `json:"reason,omitempty"`
	Started    *time.Time `json:"started,omitempty"`
	DurationMS int64      `json:"duration_ms,omitempty"`
	LogFile    string     `json:"log_file"`
	Log        string     `json:"log"`

	seq     int   // order of first appearance
	printed int64 // bytes of the log printed so far (--follow)
	done    bool  // its outcome was printed (--follow)
}

func (a *attemptDoc) key() string { return a.Atom + "\x00" + a.Role + "\x00" + strconv.Itoa(a.Attempt) }

type logsDoc struct {
	Attempts []*attemptDoc     `json:"attempts"`
	Skipped  []journal.Skipped `json:"skipped_journal_lines"`
}

// attemptBook collects the attempts of a journal as its events come.
type attemptBook struct {
	logDir string
	byKey  map[string]*attemptDoc
	order  []*attemptDoc
}

func newAttemptBook(stateFile string) *attemptBook {
	return &attemptBook{logDir: filepath.Join(journal.DirFor(stateFile), "logs"), byKey: map[string]*attemptDoc{}}
}

func (b *attemptBook) logFile(atom, role string, attempt int) string {
	return filepath.Join(b.logDir, fmt.Sprintf("%s-%s-%d.log", safeName(atom), role, attempt))
}

func (b *attemptBook) get(atom, role string, attempt int) (*attemptDoc, bool) {
	a := &attemptDoc{Atom: atom, Role: role, Attempt: attempt}
	if old, ok := b.byKey[a.key()]; ok {
		return old, false
	}
	a.seq = len(b.order)
	a.LogFile = b.logFile(atom, role, attempt)
	b.byKey[a.key()] = a
	b.order = append(b.order, a)
	return a, true
}

// attemptOf is the attempt number an event is about. The base case's
// planner is journaled without one (its log is numbered by iteration) and
// its judges too (their log is attempt 1).
func attemptOf(ev journal.Event) int {
	if ev.Attempt > 0 || ev.Atom != "base_case" {
		return ev.Attempt
	}
	if ev.Role == string(agent.Planner) {
		return ev.Iteration + 1
	}
	return 1
}

// add takes one event into the book and returns the attempt it changed.
func (b *attemptBook) add(ev journal.Event) *attemptDoc {
	switch ev.Type {
	case journal.AtomStart:
		if ev.Role == "" {
			return nil
		}
		a, _ := b.get(ev.Atom, ev.Role, attemptOf(ev))
		t := ev.Time
		a.Started = &t
		a.Outcome, a.Reason, a.DurationMS, a.done = "running", "", 0, false
		return a
	case journal.AtomFinish:
		if ev.Role == "" || ev.Reason == "replayed from the journal after a crash" {
			return nil
		}
		a, _ := b.get(ev.Atom, ev.Role, attemptOf(ev))
		a.DurationMS = ev.DurationMS
		a.Outcome, a.Reason = "failed", ev.Reason
		if ev.OK != nil && *ev.OK {
			a.Outcome = "ok"
			if ev.Role != string(agent.Judge) {
				a.Reason = ""
			}
		}
		return a
	case journal.AtomReset:
		// With a role and attempt: a run killed or sent back; without: an
		// atom orphaned by an engine that died, its latest run unfinished.
		var a *attemptDoc
		if ev.Role != "" {
			a = b.byKey[(&attemptDoc{Atom: ev.Atom, Role: ev.Role, Attempt: ev.Attempt}).key()]
		} else {
			for i := len(b.order) - 1; i >= 0; i-- {
				if b.order[i].Atom == ev.Atom {
					a = b.order[i]
					break
				}
			}
		}
		if a == nil || a.Outcome != "running" {
			return nil
		}
		a.Outcome, a.Reason = "reset", ev.Reason
		return a
	case journal.Stop, journal.RunStart, journal.RunResume:
		// Whatever still runs has no outcome any more.
		for _, a := range b.order {
			if a.Outcome == "running" {
				a.Outcome = "unfinished"
				a.Reason = "its engine ended before it did"
			}
		}
	}
	return nil
}

// addOrphanLogs adds the log files the journal does not name (a journal
// deleted or cut), ordered by modification time.
func (b *attemptBook) addOrphanLogs() {
	entries, err := os.ReadDir(b.logDir)
	if err != nil {
		return
	}
	known := map[string]bool{}
	for _, a := range b.order {
		known[filepath.Base(a.LogFile)] = true
	}
	type orphan struct {
		a   *attemptDoc
		mod time.Time
	}
	var orphans []orphan
	for _, e := range entries {
		name := e.Name()
		if known[name] || !e.Type().IsRegular() {
			continue
		}
		atom, role, n, ok := parseLogName(name)
		if !ok {
			continue
		}
		var mod time.Time
		if fi, err := e.Info(); err == nil {
			mod = fi.ModTime()
		}
		a := &attemptDoc{Atom: atom, Role: role, Attempt: n, Outcome: "unknown", Reason: "not in the journal", LogFile: filepath.Join(b.logDir, name)}
		orphans = append(orphans, orphan{a, mod})
	}
	sort.SliceStable(orphans, func(i, j int) bool { return orphans[i].mod.Before(orphans[j].mod) })
	for _, o := range orphans {
		o.a.seq = len(b.order)
		b.byKey[o.a.key()] = o.a
		b.order = append(b.order, o.a)
	}
}

// parseLogName splits ATOM-ROLE-N.log.
func parseLogName(name string) (atom, role string, n int, ok bool) {
	base, found := strings.CutSuffix(name, ".log")
	if !found {
		return "", "", 0, false
	}
	i := strings.LastIndexByte(base, '-')
	if i < 0 {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(base[i+1:])
	if err != nil || n < 0 {
		return "", "", 0, false
	}
	base = base[:i]
	for _, r := range logRoles {
		if a, found := strings.CutSuffix(base, "-"+r); found && a != "" {
			return a, r, n, true
		}
	}
	return "", "", 0, false
}

// match says whether an attempt passes the atom and role filters.
func (o *logsOptions) match(a *attemptDoc) bool {
	if o.Atom != "" && a.Atom != o.Atom && a.Atom != safeName(o.Atom) {
		return false
	}
	if o.Role != "" && a.Role != o.Role {
		return false
	}
	return o.Attempt == 0 || a.Attempt == o.Attempt
}

// selectAttempts picks what to show: every matching attempt of the atom
// given, or the latest attempt number of every atom.
func (o *logsOptions) selectAttempts(all []*attemptDoc) []*attemptDoc {
	var out []*attemptDoc
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
	return slices.DeleteFunc(out, func(a *attemptDoc) bool { return a.Attempt != latest[a.Atom] })
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
	book := newAttemptBook(opts.Global.StateFile)
	fol := journal.NewFollower(path)
	events, skipped, err := fol.Next()
	if err != nil {
		return err
	}
	warnSkipped(opts.IO, skipped)
	for _, ev := range events {
		book.add(ev)
	}
	book.addOrphanLogs()
	shown := opts.selectAttempts(book.order)
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
				doc.Attempts = []*attemptDoc{}
			}
			if doc.Skipped == nil {
				doc.Skipped = []journal.Skipped{}
			}
			writeJSON(opts.IO.Out, doc)
			return nil
		}
		if len(shown) == 0 {
			return noAttempts(opts, len(events) > 0 || len(book.order) > 0)
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
func (o *logsOptions) header(a *attemptDoc) string {
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
		out += ": " + oneLine(a.Reason, 1000)
	}
	if a.DurationMS > 0 && a.Outcome != "running" {
		out += fmt.Sprintf(" (%s)", (time.Duration(a.DurationMS) * time.Millisecond).String())
	}
	return o.IO.paint(styleBold, fmt.Sprintf("=== %s %s attempt %d:", a.Atom, a.Role, a.Attempt)) + " " + out
}

// followLogs prints as tail -f does: the attempts shown so far with their
// logs, then whatever comes, until the engine it watched stops.
func followLogs(ctx context.Context, opts *logsOptions, book *attemptBook, fol *journal.Follower, shown []*attemptDoc) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	out := opts.IO.Out
	tracked := append([]*attemptDoc{}, shown...)
	var last *attemptDoc // whose output was printed last
	printHeader := func(a *attemptDoc) {
		if last != nil {
			fmt.Fprintln(out)
		}
		fmt.Fprintln(out, opts.header(a))
		last = a
	}
	// drain prints what was added to an attempt's log since the last look.
	drain := func(a *attemptDoc) {
		data, err := readFrom(a.LogFile, a.printed)
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
		a.printed += int64(len(data))
		_, _ = out.Write(data)
	}
	finished := func(a *attemptDoc) bool { return a.Outcome != "running" }
	for _, a := range tracked {
		printHeader(a)
		drain(a)
		a.done = finished(a)
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
			a := book.add(ev)
			if a != nil && ev.Type == journal.AtomStart && opts.match(a) && !slices.Contains(tracked, a) {
				tracked = append(tracked, a)
				printHeader(a)
				a.done = false
			}
		}
		for _, a := range tracked {
			drain(a)
			if !a.done && finished(a) {
				// The log is complete once the outcome is journaled.
				drain(a)
				a.done = true
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
				book.add(ev)
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
