package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/hooks"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/local"
	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
)

type statusOptions struct {
	IO     *streams
	Global *globalOptions
	Events int
	// Watch keeps the view live: full screen on a terminal, a new status
	// block on every change otherwise.
	Watch    bool
	Interval time.Duration // how often --watch looks for changes
	now      func() time.Time
}

const statusLong = `Show where the loop stands: the goal, the control state, whether an engine
is running (and its pid), progress through the work graph, the atoms in
progress, the most recent journal events, and tokens and cost spent so far.

--watch keeps it live until q or Ctrl-C (aot top is the same). On a
terminal it is a full-screen view, redrawn when the state file, the
journal or a running agent's output changes: the loop's status with its
stop reason, iteration and bounds, elapsed time, tokens and cost; the
running agents (atom, role, attempt, elapsed time, the last line of their
output); the atoms by status, those ready to run and the failures with
their kind; the base case's checklist with the last evidence; the latest
journal events. Keys: q or Ctrl-C quit, up/down or j/k scroll, PgUp/PgDn,
g/G top and bottom, tab jumps to the next panel. When stdout is not a
terminal (a pipe, a CI log) it prints the status block again on every
change of the state file or the journal. --interval sets how often it
looks (default 250ms).

JSON (not with --watch): {goal, status, stop_reason, engine_running,
engine_pid, iteration, stall_count, atoms: {total, resolved, unresolved,
in_progress: [id]}, usage: {tokens, cost_usd}, recent_events: [event]}; for a
loop on Temporal (aot run --engine temporal) the workflow is asked first, the
state file brought in step with it, and workflow: {workflow_id, running,
status, paused, attempts: [{atom, attempt, started}], outcome} says what it
answered (status is Temporal's word for it). When no worker polls the
workflow's task queue it is not asked (it could not answer): no_worker is
true, and the rest is the state file as last projected.`

func newCmdStatus(d *deps, g *globalOptions, runF func(*statusOptions) error) *cobra.Command {
	opts := &statusOptions{IO: d.io, Global: g, now: d.now}
	cmd := opts.command("status [--watch [--interval D]]",
		"Where the loop stands: goal, progress, running atoms, recent events, cost", statusLong, 8, runF)
	cmd.Flags().BoolVarP(&opts.Watch, "watch", "w", false, "keep the view live until q or Ctrl-C (aot top)")
	return cmd
}

// command is aot status's or aot top's command.
func (o *statusOptions) command(use, short, long string, events int, runF func(*statusOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return statusRun(cmd.Context(), o)
		}),
	}
	o.flags(cmd, events)
	return cmd
}

// flags are the ones aot status and aot top share.
func (o *statusOptions) flags(cmd *cobra.Command, events int) {
	cmd.Flags().IntVar(&o.Events, "events", events, "how many recent events to show")
	cmd.Flags().DurationVar(&o.Interval, "interval", 250*time.Millisecond, "how often --watch looks for changes `D`")
}

func (o *statusOptions) check(cmd *cobra.Command) error {
	if o.Events < 0 {
		return usagef("--events must not be negative")
	}
	if o.Interval <= 0 {
		return usagef("--interval must be positive")
	}
	if flagChanged(cmd.Flags(), "interval") && !o.Watch {
		return usagef("--interval goes with --watch")
	}
	if o.Watch && o.Global.JSON {
		return usagef("--watch keeps redrawing; --json gives one document: use one of them")
	}
	return nil
}

type statusAtomsDoc struct {
	Total      int      `json:"total"`
	Resolved   int      `json:"resolved"`
	Unresolved int      `json:"unresolved"`
	InProgress []string `json:"in_progress"`
}

type statusUsageDoc struct {
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
	// Unknown counts attempts whose usage nobody reported: the totals are a
	// lower bound when it is not 0.
	Unknown int `json:"unknown_attempts"`
	// Atoms is the spend per atom, all attempts and roles together.
	Atoms map[string]atomSpendDoc `json:"atoms"`
	// Roles is the spend per role (worker, probe, judge, ...).
	Roles map[string]atomSpendDoc `json:"roles"`
}

// spendDocs is history's spend in aot status's shape.
func spendDocs(m map[string]history.Spend) map[string]atomSpendDoc {
	out := make(map[string]atomSpendDoc, len(m))
	for k, v := range m {
		out[k] = atomSpendDoc{Attempts: v.Attempts, Tokens: v.Tokens, CostUSD: v.CostUSD, DurationMS: v.DurationMS}
	}
	return out
}

type atomSpendDoc struct {
	Attempts   int     `json:"attempts"`
	Tokens     int64   `json:"tokens"`
	CostUSD    float64 `json:"cost_usd"`
	DurationMS int64   `json:"duration_ms"`
}

type sessionDoc struct {
	Client string `json:"client"`
	ID     string `json:"id"`
	Since  string `json:"since"`
	// Resume is how a person brings the session back when it ended
	// before the loop did.
	Resume string `json:"resume"`
}

type statusDoc struct {
	Goal          string         `json:"goal"`
	Status        string         `json:"status"`
	StopReason    *string        `json:"stop_reason"`
	EngineRunning bool           `json:"engine_running"`
	EnginePID     int            `json:"engine_pid,omitempty"`
	Iteration     int            `json:"iteration"`
	StallCount    int            `json:"stall_count"`
	Atoms         statusAtomsDoc `json:"atoms"`
	Usage         statusUsageDoc `json:"usage"`
	// Agents is each role's agent: as the last run journaled it, else as
	// the agents file sets it.
	Agents map[string]string `json:"agents"`
	// Confinement says whether agents are confined to their workdir: as
	// the last run journaled it, else as aot run would confine them here.
	Confinement confine.Status `json:"confinement"`
	// QuotaWaitUntil is set while the loop waits for the agent's quota to
	// reset (RFC 3339).
	QuotaWaitUntil string `json:"quota_wait_until,omitempty"`
	// Paused is set while a person holds the running loop (aot pause).
	Paused *engine.PauseInfo `json:"paused,omitempty"`
	// Session is the client session that drives an in-session loop (the
	// plugin's enter-recursion): no engine runs it, its stop hook does.
	Session *sessionDoc `json:"session,omitempty"`
	// Workflow is what a loop's Temporal workflow answered (aot run
	// --engine temporal), when it could be asked.
	Workflow     *workflowDoc    `json:"workflow,omitempty"`
	RecentEvents []journal.Event `json:"recent_events"`
}

// statusView is what aot status shows, gathered once: the JSON document
// and what the text and the live view (aot top) draw from it.
type statusView struct {
	Doc   statusDoc
	State *state.State
	// Events is the whole journal; Doc.RecentEvents its last lines shown.
	Events []journal.Event
}

// gatherStatus reads the state file and its journal into a statusView with
// the last events recent events (checkpoints left out). Warnings about the
// files go to io.ErrOut.
func gatherStatus(io *streams, g *globalOptions, events int) (*statusView, error) {
	s, err := readShown(io, g)
	if err != nil {
		return nil, err
	}
	pid, held, err := runlock.Holder(g.StateFile)
	if err != nil {
		return nil, err
	}
	doc := statusDoc{
		Goal: s.Objective.Goal, Status: s.Control.Status, StopReason: s.Control.StopReason,
		EngineRunning: held, EnginePID: pid, Iteration: s.Control.Iteration, StallCount: s.Control.StallCount,
		Atoms:        statusAtomsDoc{Total: len(s.Atoms), Unresolved: dag.Unresolved(s), InProgress: []string{}},
		RecentEvents: []journal.Event{},
	}
	if o, err := hooks.ReadOwner(g.StateFile); err == nil && o != nil && !held && s.Control.Status == state.ControlRunning {
		doc.Session = &sessionDoc{Client: string(o.Client), ID: o.SessionID, Since: o.ClaimedAt, Resume: o.ResumeHint()}
	}
	if p, ok := local.Paused(g.StateFile); ok && held {
		doc.Paused = &p
	}
	for _, a := range s.Atoms {
		switch a.Status {
		case state.StatusResolved:
			doc.Atoms.Resolved++
		case state.StatusInProgress:
			doc.Atoms.InProgress = append(doc.Atoms.InProgress, a.ID)
		}
	}
	all, err := readJournal(io, g.StateFile)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(journal.PathFor(g.StateFile)); errors.Is(err, os.ErrNotExist) && s.Control.Iteration > 0 {
		fmt.Fprintf(io.ErrOut, "aot: warning: no journal at %s although the loop has run (iteration %d): its spend and history are unknown, not 0\n", journal.PathFor(g.StateFile), s.Control.Iteration)
	}
	spend := history.SpendOf(all)
	doc.Usage.Tokens, doc.Usage.CostUSD, doc.Usage.Unknown = spend.Total.Tokens, spend.Total.CostUSD, spend.Total.Unknown
	doc.Usage.Atoms, doc.Usage.Roles = spendDocs(spend.Atoms), spendDocs(spend.Roles)
	for _, ev := range all {
		switch ev.Type {
		case journal.QuotaWait:
			doc.QuotaWaitUntil = journal.DataOf[journal.QuotaWaitData](ev).Until
		case journal.QuotaResume, journal.Stop, journal.RunStart, journal.RunResume:
			doc.QuotaWaitUntil = ""
		}
		if ev.Type == journal.RunStart || ev.Type == journal.RunResume {
			d := journal.DataOf[journal.RunStartData](ev)
			if ev.Type == journal.RunResume {
				r := journal.DataOf[journal.RunResumeData](ev)
				d.Agents, d.Confinement = r.Agents, r.Confinement
			}
			if d.Confinement != nil {
				doc.Confinement.On, doc.Confinement.Why = d.Confinement.On, d.Confinement.Why
			}
			if d.Agents != nil {
				doc.Agents = d.Agents
			}
		}
	}
	if doc.Confinement.Why == "" {
		if p := confine.Probe(); p.On {
			doc.Confinement.Why = "no run yet; aot run would confine agents here with " + p.Why
		} else {
			doc.Confinement.Why = "no run yet; aot run could not confine agents here: " + p.Why
		}
	}
	if doc.Agents == nil {
		doc.Agents = map[string]string{}
		if cfg, err := backend.Load(g.StateFile); err == nil {
			doc.Agents = agentsDoc(cfg)
		} else {
			doc.Agents["error"] = err.Error()
		}
	}
	var shown []journal.Event
	for i := len(all) - 1; i >= 0 && len(shown) < events; i-- {
		if all[i].Type != journal.Checkpoint {
			shown = append([]journal.Event{all[i]}, shown...)
		}
	}
	doc.RecentEvents = append(doc.RecentEvents, shown...)
	return &statusView{Doc: doc, State: s, Events: all}, nil
}

func statusRun(ctx context.Context, opts *statusOptions) error {
	if opts.Watch {
		return watchRun(ctx, opts)
	}
	// A loop on Temporal: the workflow is the truth; bring the local file
	// in step first (it may be behind while no aot run is attached).
	var wf *workflowDoc
	if onTemporalLoop(opts.Global.StateFile) {
		wf = syncWorkflow(opts)
	}
	v, err := gatherStatus(opts.IO, opts.Global, opts.Events)
	if err != nil {
		return err
	}
	v.Doc.Workflow = wf
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, v.Doc)
		return nil
	}
	writeStatus(opts.IO, v)
	return nil
}

// writeStatus prints a statusView as aot status does.
func writeStatus(io *streams, v *statusView) {
	doc, s := &v.Doc, v.State
	tw := io.table()
	fmt.Fprintf(tw, "Goal\t%s\n", dag.OneLine(doc.Goal, 90))
	engineLine := "not running"
	if doc.EngineRunning {
		engineLine = fmt.Sprintf("running (pid %d)", doc.EnginePID)
	}
	if se := doc.Session; se != nil {
		engineLine = fmt.Sprintf("none: in-session, waiting for its %s session %s (if that session has ended: %s)", se.Client, se.ID, se.Resume)
	}
	if wf := doc.Workflow; wf != nil {
		engineLine = "on Temporal, workflow " + wf.ID
		if wf.Status != "" {
			engineLine += " (" + wf.Status + ")"
		}
	}
	fmt.Fprintf(tw, "Loop\t%s, iteration %d, stall %d/%d, engine %s\n", io.status(doc.Status), doc.Iteration, doc.StallCount, s.Objective.Constraints.MaxStallCount, engineLine)
	if doc.StopReason != nil {
		fmt.Fprintf(tw, "Stop reason\t%s\n", *doc.StopReason)
	}
	fmt.Fprintf(tw, "Progress\t%s %d/%d atoms resolved, %d unresolved\n", bar(doc.Atoms.Resolved, doc.Atoms.Total, 20), doc.Atoms.Resolved, doc.Atoms.Total, doc.Atoms.Unresolved)
	fmt.Fprintf(tw, "Running\t%s\n", orDash(strings.Join(doc.Atoms.InProgress, ", ")))
	if wf := doc.Workflow; wf != nil {
		writeWorkflow(tw, wf)
	}
	fmt.Fprintf(tw, "Agents\t%s\n", agentsLine(doc.Agents))
	fmt.Fprintf(tw, "Confined\t%s\n", confinedLine(doc.Confinement))
	if refused := refusedTools(v.Events, 3); refused != "" {
		fmt.Fprintf(tw, "Refused tools\t%s\n", refused)
	}
	if r := retried(v.Events, 3); r != "" {
		fmt.Fprintf(tw, "Retries\t%s\n", r)
	}
	if kept := keptWorktrees(v.Events); len(kept) > 0 {
		fmt.Fprintf(tw, "Kept attempts\t%s\n", strings.Join(kept, "; "))
	}
	if p := doc.Paused; p != nil {
		how := "running agents finish"
		if p.Kill {
			how = "running agents were killed"
		}
		fmt.Fprintf(tw, "Paused\tsince %s (%s): nothing new starts, %s; aot resume lets it go on\n", p.Since.Local().Format("15:04:05"), p.Reason, how)
	}
	if doc.QuotaWaitUntil != "" {
		fmt.Fprintf(tw, "Waiting\tfor the agent's usage limit to reset at %s; the loop goes on by itself (aot stop ends it)\n", doc.QuotaWaitUntil)
	}
	if doc.Usage.Tokens > 0 || doc.Usage.CostUSD > 0 || doc.Usage.Unknown > 0 {
		spent := fmt.Sprintf("%d tokens, $%.4f", doc.Usage.Tokens, doc.Usage.CostUSD)
		if doc.Usage.Unknown > 0 {
			spent += fmt.Sprintf(" (at least: %s reported no usage)", brief.Count(doc.Usage.Unknown, "attempt"))
		}
		fmt.Fprintf(tw, "Spent\t%s\n", spent)
		if top := topSpenders(doc.Usage.Atoms, 3); top != "" {
			fmt.Fprintf(tw, "Most spent on\t%s\n", top)
		}
		if by := roleSpend(doc.Usage.Roles); by != "" {
			fmt.Fprintf(tw, "By role\t%s\n", by)
		}
	}
	_ = tw.Flush()
	if len(doc.RecentEvents) > 0 {
		fmt.Fprintln(io.Out)
		tw = io.table()
		for _, ev := range doc.RecentEvents {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", ev.Time.Local().Format("15:04:05"), ev.Type, describeEvent(ev))
		}
		_ = tw.Flush()
	}
}

// confinedLine says whether agents are confined, and why.
func confinedLine(st confine.Status) string {
	if st.On {
		return "yes: " + st.Why
	}
	return "no: " + st.Why
}

// refusedTools names the last n tool calls the agents' CLIs refused
// (permission_denied events), with how many there were in all.
func refusedTools(events []journal.Event, n int) string {
	return lastOf(events, n, journal.PermissionDenied)
}

// retried lists the last n retries of model calls and activities, with
// how many there were in all ("" when none): whichever layer retried, the
// agent's CLI (model_retry) or Temporal (attempt_retry).
func retried(events []journal.Event, n int) string {
	return lastOf(events, n, journal.ModelRetry, journal.AttemptRetry)
}

// lastOf lists the last n events of the types, by atom and attempt, with
// how many there were in all.
func lastOf(events []journal.Event, n int, types ...string) string {
	var all []string
	for _, ev := range events {
		if slices.Contains(types, ev.Type) {
			all = append(all, fmt.Sprintf("%s attempt %d: %s", ev.Atom, ev.Attempt, dag.OneLine(ev.Reason, 100)))
		}
	}
	if len(all) == 0 {
		return ""
	}
	line := strings.Join(all[max(0, len(all)-n):], "; ")
	if len(all) > n {
		line = fmt.Sprintf("%d in all, the last: %s", len(all), line)
	}
	return line
}

// topSpenders names the atoms that cost the most.
func topSpenders(atoms map[string]atomSpendDoc, n int) string {
	ids := make([]string, 0, len(atoms))
	for id, a := range atoms {
		if a.CostUSD > 0 || a.Tokens > 0 {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := atoms[ids[i]], atoms[ids[j]]
		if a.CostUSD != b.CostUSD {
			return a.CostUSD > b.CostUSD
		}
		if a.Tokens != b.Tokens {
			return a.Tokens > b.Tokens
		}
		return ids[i] < ids[j]
	})
	var parts []string
	for _, id := range ids[:min(n, len(ids))] {
		a := atoms[id]
		parts = append(parts, fmt.Sprintf("%s $%.4f, %d tokens, %s", id, a.CostUSD, a.Tokens, brief.Count(a.Attempts, "run")))
	}
	return strings.Join(parts, "; ")
}

func bar(done, total, width int) string {
	if total <= 0 {
		return "[" + strings.Repeat(".", width) + "]"
	}
	n := done * width / total
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func describeEvent(ev journal.Event) string {
	var parts []string
	if ev.Atom != "" {
		parts = append(parts, ev.Atom)
	}
	if ev.Role != "" {
		parts = append(parts, ev.Role)
	}
	if ev.Attempt > 0 {
		parts = append(parts, fmt.Sprintf("attempt %d", ev.Attempt))
	}
	if ev.OK != nil {
		if *ev.OK {
			parts = append(parts, "ok")
		} else {
			parts = append(parts, "failed")
		}
	}
	if ev.DurationMS > 0 {
		parts = append(parts, (time.Duration(ev.DurationMS) * time.Millisecond).String())
	}
	failedAttempt := ev.Type == journal.AtomFinish && ev.OK != nil && !*ev.OK && ev.Atom != ""
	if k := journal.DataOf[journal.AtomFinishData](ev).Kind; k != "" && failedAttempt {
		parts = append(parts, "["+k+"]")
	}
	if ev.Reason != "" {
		max := 70
		if failedAttempt {
			// The reason quotes the start of what the agent printed.
			max = 240
		}
		parts = append(parts, dag.OneLine(ev.Reason, max))
	}
	if failedAttempt {
		parts = append(parts, "(output: aot logs "+shellWord(ev.Atom)+")")
	}
	switch ev.Type {
	case journal.AttemptRetry:
		d := journal.DataOf[journal.AttemptRetryData](ev)
		parts = append(parts, fmt.Sprintf("Temporal's try %d of %s", d.Try, d.Activity))
		if d.Worker != "" {
			parts = append(parts, "after a failure on worker "+d.Worker)
		}
		if d.RunningOn != "" {
			parts = append(parts, "running on worker "+d.RunningOn)
		}
	case journal.Worktree, journal.Merge:
		var branch, path, commit string
		var changed []string
		if ev.Type == journal.Worktree {
			d := journal.DataOf[journal.WorktreeData](ev)
			branch, path, commit, changed = d.Branch, d.Path, d.Commit, d.Changed
		} else {
			d := journal.DataOf[journal.MergeData](ev)
			branch, commit, changed = d.Branch, d.Commit, d.Changed
		}
		if branch != "" {
			parts = append(parts, "branch "+branch)
		}
		if path != "" {
			parts = append(parts, path)
		}
		if commit != "" {
			parts = append(parts, "commit "+commit[:min(len(commit), 10)])
		}
		if len(changed) > 0 {
			parts = append(parts, "changed "+dag.OneLine(strings.Join(changed, ", "), 80))
		}
	}
	return strings.Join(parts, "  ")
}

// readJournal reads the journal of a state file for a command that shows
// it: a missing journal is an empty one, and a line that is not an event is
// skipped with a warning on stderr naming the file and line.
func readJournal(io *streams, stateFile string) ([]journal.Event, error) {
	events, skipped, err := journal.Scan(journal.PathFor(stateFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	warnSkipped(io, skipped)
	return events, nil
}

func warnSkipped(io *streams, skipped []journal.Skipped) {
	for _, sk := range skipped {
		fmt.Fprintf(io.ErrOut, "aot: warning: %s\n", sk)
	}
}

// shellWord quotes an atom id for a command line when it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// keptWorktrees lists the failed attempts kept with --keep-failed whose
// worktree is still there.
func keptWorktrees(events []journal.Event) []string {
	var out []string
	for _, ev := range events {
		if !ev.IsWorktreeKept() {
			continue
		}
		d := journal.DataOf[journal.WorktreeData](ev)
		if _, err := os.Stat(d.Path); err == nil {
			out = append(out, fmt.Sprintf("%s attempt %d: %s (branch %s)", ev.Atom, ev.Attempt, d.Path, d.Branch))
		}
	}
	return out
}

// agentsLine shows each role's agent compactly: roles sharing one agent are
// listed together.
func agentsLine(agents map[string]string) string {
	if e, ok := agents["error"]; ok {
		return "the agents file cannot be read: " + e
	}
	var order []string
	by := map[string][]string{}
	for _, r := range agent.Roles {
		a, ok := agents[string(r)]
		if !ok {
			continue
		}
		if _, seen := by[a]; !seen {
			order = append(order, a)
		}
		by[a] = append(by[a], string(r))
	}
	if len(order) == 1 {
		return order[0] + " (every role)"
	}
	var parts []string
	for _, a := range order {
		parts = append(parts, strings.Join(by[a], ", ")+": "+a)
	}
	return orDash(strings.Join(parts, "; "))
}

// roleSpend is the spend per role, in the order of agent.Roles.
func roleSpend(roles map[string]atomSpendDoc) string {
	var parts []string
	for _, r := range agent.Roles {
		sp, ok := roles[string(r)]
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d× %d tokens $%.4f %s", r, sp.Attempts, sp.Tokens, sp.CostUSD, (time.Duration(sp.DurationMS)*time.Millisecond).Round(time.Second)))
	}
	return strings.Join(parts, "; ")
}

// writeWorkflow prints what a loop's Temporal workflow answered: who
// serves it, its pause and its attempts on the workers.
func writeWorkflow(tw *tabwriter.Writer, wf *workflowDoc) {
	switch {
	case wf.NoWorker:
		fmt.Fprintf(tw, "Workers\tnone polls task queue %s: start one with aot worker --task-queue %s\n", wf.TaskQueue, wf.TaskQueue)
	case len(wf.Workers) > 0:
		fmt.Fprintf(tw, "Workers\t%s on task queue %s\n", strings.Join(wf.Workers, ", "), wf.TaskQueue)
	}
	if wf.Paused {
		line := "yes"
		if wf.PausedSince != nil {
			line = "since " + wf.PausedSince.Local().Format("15:04:05")
		}
		if wf.PausedKill {
			line += ", its attempts killed"
		}
		fmt.Fprintf(tw, "Paused\t%s (aot resume goes on)\n", line)
	}
	if len(wf.Attempts) > 0 {
		var on []string
		for _, a := range wf.Attempts {
			on = append(on, fmt.Sprintf("%s attempt %d (%s)", a.Atom, a.Attempt, time.Since(a.Started).Round(time.Second)))
		}
		fmt.Fprintf(tw, "On workers\t%s\n", strings.Join(on, ", "))
	}
}
