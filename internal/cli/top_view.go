package cli

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// liveView is what aot top draws beyond aot status: the loop's phase, the
// run's clock, the running agents with their latest output, the atoms by
// status and the base case's last verification.
type liveView struct {
	*statusView
	Paused  bool
	Started time.Time // the current (or last) run's start; zero before any
	Ended   time.Time // its stop; zero while it runs
	Running []*history.Attempt
	// LastLines is each running attempt's last line of output.
	LastLines map[*history.Attempt]string
	// Kinds is each atom's kind of failure in its last failed attempt.
	Kinds map[string]string
	// Checks is the last verification's checklist by item, nil before one.
	Checks   map[string]checkResult
	Verified time.Time
	// Warnings are what reading the files said (shown, not printed).
	Warnings string
}

type checkResult struct {
	Passed   bool
	Evidence string
}

// gatherLive reads a statusView and the rest of what aot top shows.
func gatherLive(io *streams, g *globalOptions, events int) (*liveView, error) {
	var warn strings.Builder
	quiet := *io
	quiet.ErrOut = &warn
	v, err := gatherStatus(&quiet, g, events)
	if err != nil {
		return nil, err
	}
	lv := &liveView{statusView: v, LastLines: map[*history.Attempt]string{}, Kinds: map[string]string{},
		Warnings: strings.TrimSpace(warn.String())}
	book := history.NewBook(g.StateFile)
	for _, ev := range v.Events {
		book.Add(ev)
		switch ev.Type {
		case journal.RunStart, journal.RunResume:
			lv.Started, lv.Ended, lv.Paused = ev.Time, time.Time{}, false
		case journal.Stop:
			lv.Ended, lv.Paused = ev.Time, false
		case journal.Pause:
			lv.Paused = true
		case journal.Resume:
			lv.Paused = false
		case journal.AtomFinish:
			if ev.OK != nil && !*ev.OK && ev.Atom != "" {
				lv.Kinds[ev.Atom] = journal.DataOf[journal.AtomFinishData](ev).Kind
			}
		case journal.Verify:
			lv.Checks, lv.Verified = checklistResults(journal.DataOf[journal.VerifyData](ev).Checklist), ev.Time
		}
	}
	if v.Doc.EngineRunning {
		for _, a := range book.Attempts() {
			if a.Outcome == "running" {
				lv.Running = append(lv.Running, a)
				lv.LastLines[a] = lastLine(a.LogFile)
			}
		}
	}
	return lv, nil
}

// checklistResults flattens a verify event's checklist (as JSON decoded it)
// into results by item name, groups' members included.
func checklistResults(items []verify.ItemResult) map[string]checkResult {
	out := map[string]checkResult{}
	var walk func(items []verify.ItemResult)
	walk = func(items []verify.ItemResult) {
		for _, it := range items {
			out[it.Item] = checkResult{Passed: it.Passed, Evidence: it.Evidence}
			walk(it.GroupResults)
			walk(it.AnyOfResults)
		}
	}
	walk(items)
	return out
}

// lastLine is the last line holding text of a log file, escapes removed.
func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 4096
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-tail, 0)
	buf := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(buf, off)
	lines := strings.Split(ansi.Strip(string(buf[:n])), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.Join(strings.Fields(lines[i]), " "); l != "" {
			return l
		}
	}
	return ""
}

// topStyles are the live view's colours; NO_COLOR and plain terminals
// lose them on the way out.
var (
	topTitle   = lipgloss.NewStyle().Bold(true)
	topSection = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Blue)
	topDim     = lipgloss.NewStyle().Foreground(lipgloss.BrightBlack)
	topGood    = lipgloss.NewStyle().Foreground(lipgloss.Green)
	topBad     = lipgloss.NewStyle().Foreground(lipgloss.Red)
	topBusy    = lipgloss.NewStyle().Foreground(lipgloss.Cyan)
	topWait    = lipgloss.NewStyle().Foreground(lipgloss.Yellow)
)

// topPanel is one titled part of the live view's body.
type topPanel struct {
	Title string
	Lines []string
}

// loopPhase is the loop's status as a person reads it, with its reason.
func (lv *liveView) loopPhase() string {
	st := lv.Doc.Status
	switch {
	case lv.Paused && lv.Doc.EngineRunning:
		st = topWait.Render("paused")
	case st == state.ControlCompleted:
		st = topGood.Render(st)
	case st == state.ControlStopped:
		st = topBad.Render(st)
	case st == state.ControlRunning && lv.Doc.EngineRunning:
		st = topBusy.Render(st)
	case st == state.ControlRunning:
		st += " (no engine)"
	}
	if lv.Doc.StopReason != nil && *lv.Doc.StopReason != "" {
		st += ": " + *lv.Doc.StopReason
	}
	return st
}

// header is the lines above the panels.
func (lv *liveView) header(now time.Time) []string {
	doc, c := &lv.Doc, lv.State.Objective.Constraints
	iter := fmt.Sprintf("iteration %d", doc.Iteration)
	if c.MaxIterations > 0 {
		iter += fmt.Sprintf("/%d", c.MaxIterations)
	}
	loop := fmt.Sprintf("%s  %s  stall %d/%d", lv.loopPhase(), iter, doc.StallCount, c.MaxStallCount)
	if doc.EngineRunning {
		loop += fmt.Sprintf("  pid %d", doc.EnginePID)
	}
	clock := "not started"
	if !lv.Started.IsZero() {
		end := now
		if !lv.Ended.IsZero() {
			end = lv.Ended
		}
		clock = "elapsed " + end.Sub(lv.Started).Round(time.Second).String()
		if c.MaxWallTime != "" {
			clock += " of " + c.MaxWallTime
		}
	}
	spent := fmt.Sprintf("%d tokens", doc.Usage.Tokens)
	if c.MaxTokens > 0 {
		spent += fmt.Sprintf("/%d", c.MaxTokens)
	}
	spent += fmt.Sprintf("  $%.4f", doc.Usage.CostUSD)
	if c.MaxCostUSD > 0 {
		spent += fmt.Sprintf("/$%.2f", c.MaxCostUSD)
	}
	if doc.Usage.Unknown > 0 {
		spent += fmt.Sprintf(" (at least: %d unreported)", doc.Usage.Unknown)
	}
	progress := fmt.Sprintf("%s %d/%d resolved", bar(doc.Atoms.Resolved, doc.Atoms.Total, 20), doc.Atoms.Resolved, doc.Atoms.Total)
	lines := []string{
		topTitle.Render("aot top") + "  " + dag.OneLine(doc.Goal, 200),
		"Loop  " + loop,
		"Time  " + clock + "   Spent  " + spent,
		"Work  " + progress,
	}
	if doc.QuotaWaitUntil != "" {
		lines = append(lines, topWait.Render("Waiting for the agent's usage limit to reset at "+doc.QuotaWaitUntil))
	}
	return lines
}

// panels are the scrolling body: running agents, atoms, base case, events.
func (lv *liveView) panels(now time.Time) []topPanel {
	running := topPanel{Title: fmt.Sprintf("Running (%d)", len(lv.Running))}
	for _, a := range lv.Running {
		el := ""
		if a.Started != nil {
			el = now.Sub(*a.Started).Round(time.Second).String()
		}
		line := fmt.Sprintf("%s  %s #%d  %s", topBusy.Render(a.Atom), a.Role, a.Attempt, el)
		if last := lv.LastLines[a]; last != "" {
			line += "  " + topDim.Render("│ "+last)
		}
		running.Lines = append(running.Lines, line)
	}
	if len(running.Lines) == 0 {
		running.Lines = []string{topDim.Render("no agent is running")}
	}
	return []topPanel{running, lv.atomsPanel(), lv.checklistPanel(), lv.eventsPanel()}
}

// atomsPanel lists the atoms: running, ready, failed, waiting, resolved.
func (lv *liveView) atomsPanel() topPanel {
	s := lv.State
	ready := map[string]bool{}
	for _, a := range dag.Executable(s, 0) {
		ready[a.ID] = true
	}
	// An agent at work on an atom is the news, before the state file says so.
	busy := map[string]bool{}
	for _, a := range lv.Running {
		busy[a.Atom] = true
	}
	resolved := map[string]bool{}
	for _, a := range s.Atoms {
		if a.Status == state.StatusResolved {
			resolved[a.ID] = true
		}
	}
	type row struct {
		rank int
		line string
	}
	var rows []row
	counts := map[string]int{}
	for _, a := range s.Atoms {
		var r row
		switch {
		case a.Status == state.StatusInProgress || busy[a.ID] && a.Status != state.StatusResolved:
			r = row{0, topBusy.Render("running ") + " " + a.ID}
			counts["running"]++
		case a.Status == state.StatusResolved:
			r = row{4, topGood.Render("resolved") + " " + a.ID}
			counts["resolved"]++
		case ready[a.ID]:
			r = row{1, topWait.Render("ready   ") + " " + a.ID}
			counts["ready"]++
		default:
			var on []string
			for _, d := range a.DependsOn {
				if !resolved[d] {
					on = append(on, d)
				}
			}
			r = row{3, topDim.Render("waiting ") + " " + a.ID}
			if len(on) > 0 {
				r.line += topDim.Render(" on " + strings.Join(on, ", "))
			}
			counts["waiting"]++
		}
		if a.Attempts > 0 && a.Status != state.StatusResolved {
			fail := fmt.Sprintf("failed %d×", a.Attempts)
			if k := lv.Kinds[a.ID]; k != "" {
				fail += " [" + k + "]"
			}
			if a.LastFailure != "" {
				fail += " " + dag.OneLine(a.LastFailure, 200)
			}
			r.line += "  " + topBad.Render(fail)
			if r.rank > 2 {
				r.rank = 2
			}
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].rank < rows[j].rank })
	p := topPanel{Title: fmt.Sprintf("Atoms (%d running, %d ready, %d waiting, %d resolved)",
		counts["running"], counts["ready"], counts["waiting"], counts["resolved"])}
	for _, r := range rows {
		p.Lines = append(p.Lines, r.line)
	}
	if len(p.Lines) == 0 {
		p.Lines = []string{topDim.Render("no atoms")}
	}
	return p
}

// checklistPanel is the base case's items with the last verification's
// verdict and evidence.
func (lv *liveView) checklistPanel() topPanel {
	p := topPanel{Title: "Base case"}
	if lv.Checks == nil {
		p.Title += " (not verified yet)"
	} else {
		p.Title += " (verified " + lv.Verified.Local().Format("15:04:05") + ")"
	}
	mark := func(item string) string {
		r, ok := lv.Checks[item]
		switch {
		case !ok:
			return topDim.Render("·") + " " + item
		case r.Passed:
			return topGood.Render("✓") + " " + item + topDim.Render("  "+dag.OneLine(r.Evidence, 200))
		default:
			return topBad.Render("✗") + " " + item + topDim.Render("  "+dag.OneLine(r.Evidence, 200))
		}
	}
	bc := lv.State.Objective.BaseCase
	var walk func(items []state.ChecklistItem, indent string)
	walk = func(items []state.ChecklistItem, indent string) {
		for _, it := range items {
			p.Lines = append(p.Lines, indent+mark(it.Item))
			walk(it.Group, indent+"  ")
			walk(it.AnyOf, indent+"  ")
		}
	}
	switch {
	case bc == nil:
	case bc.Legacy != nil:
		// A single check's result is journaled under its type's name.
		line := bc.Legacy.Type + " " + bc.Legacy.Value
		for item := range lv.Checks {
			line = mark(item) + topDim.Render("  ("+bc.Legacy.Type+" "+bc.Legacy.Value+")")
			break
		}
		p.Lines = append(p.Lines, line)
	default:
		walk(bc.Checklist, "")
	}
	if len(p.Lines) == 0 {
		p.Lines = []string{topDim.Render("no base case")}
	}
	return p
}

func (lv *liveView) eventsPanel() topPanel {
	p := topPanel{Title: "Events"}
	evs := lv.Doc.RecentEvents
	for i := len(evs) - 1; i >= 0; i-- { // newest first
		ev := evs[i]
		p.Lines = append(p.Lines, topDim.Render(ev.Time.Local().Format("15:04:05"))+" "+ev.Type+"  "+describeEvent(ev))
	}
	if len(p.Lines) == 0 {
		p.Lines = []string{topDim.Render("no events yet")}
	}
	return p
}

// fit cuts a styled line to width cells.
func fit(line string, width int) string {
	if width <= 0 {
		return ""
	}
	return ansi.Truncate(line, width, "…")
}
