package ccw

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// maxErrors bounds skill_state.errors: the latest ones are kept (debug.log
// has them all).
const maxErrors = 50

// baseCaseAtom is the journal's atom name for the base case's agents.
const baseCaseAtom = "base_case"

// Build maps a loop's state (nil when it cannot be read) and its whole
// journal to the CCW document. paused says the loop's engine is paused. It
// reads nothing and is deterministic: the same inputs give the same
// document. Test reports and coverage are parsed from the evidence the
// verify event carries (the tail of a failed check's output); BuildWith
// takes the checks' whole outputs.
func Build(m Meta, s *state.State, events []journal.Event, paused bool) Loop {
	return BuildWith(m, s, events, paused, nil)
}

// BuildWith is Build with the whole output of each command check of the
// last verification (see CheckOutputs), keyed by check.
func BuildWith(m Meta, s *state.State, events []journal.Event, paused bool, outputs map[string]string) Loop {
	h := scanJournal(s, events)
	l := Loop{
		LoopID:        m.ID,
		Title:         m.Title,
		Description:   m.Description,
		CreatedAt:     m.CreatedAt,
		Workspace:     m.Workspace,
		StateFile:     m.StateFile,
		JournalEvents: len(events),
	}
	if l.CreatedAt.IsZero() && len(events) > 0 {
		l.CreatedAt = events[0].Time
	}
	l.UpdatedAt = l.CreatedAt
	if len(events) > 0 {
		l.UpdatedAt = events[len(events)-1].Time
	}
	l.Status, l.FailureReason = StatusOf(s, paused, h.lastStop)
	if s != nil {
		l.MaxIterations = s.Objective.Constraints.MaxIterations
		l.CurrentIteration = s.Control.Iteration
	}
	ended := l.Status == StatusCompleted || l.Status == StatusFailed || l.Status == StatusUserExit
	if ended && h.lastStop != nil {
		t := h.lastStop.Time
		l.CompletedAt = &t
	}

	ss := &SkillState{Mode: "auto", CompletedActions: h.actions, Errors: h.errors}
	if ss.CompletedActions == nil {
		ss.CompletedActions = []string{}
	}
	if ss.Errors == nil {
		ss.Errors = []ErrorEntry{}
	}
	if n := len(h.actions); n > 0 {
		last := h.actions[n-1]
		ss.LastAction = &last
		switch l.Status {
		case StatusRunning, StatusPaused:
			cur := strings.ToLower(last)
			ss.CurrentAction = &cur
		case StatusCompleted:
			cur := "complete"
			ss.CurrentAction = &cur
		}
	}
	ss.Develop = develop(s, h)
	ss.Debug = debug(s, h)
	ss.Validate = validate(h.lastVerify, h.verifies, outputs)
	if ended {
		ss.Summary = summarize(&l, ss, h)
	}
	l.SkillState = ss
	return l
}

// StatusOf maps the control status to CCW's (paused: an engine holds the
// loop paused; stop: the journal's last stop event, for its reason).
func StatusOf(s *state.State, paused bool, stop *journal.Event) (status, failure string) {
	if s == nil {
		return StatusCreated, ""
	}
	switch s.Control.Status {
	case state.ControlRunning:
		if paused {
			return StatusPaused, ""
		}
		return StatusRunning, ""
	case state.ControlCompleted:
		return StatusCompleted, ""
	case state.ControlStopped:
		reason := ""
		if s.Control.StopReason != nil {
			reason = *s.Control.StopReason
		}
		if strings.HasPrefix(reason, "manual stop") || reason == "" && stop != nil && stop.Reason == "manual_stop" {
			return StatusUserExit, ""
		}
		if reason == "" && stop != nil {
			reason = stop.Reason
			if msg := journal.DataOf[journal.StopData](*stop).Message; msg != "" {
				reason = msg
			}
		}
		if reason == "" {
			reason = "stopped (no reason recorded)"
		}
		return StatusFailed, reason
	}
	return StatusCreated, ""
}

// atomLog is what the journal says of one atom.
type atomLog struct {
	starts     int
	tool, mode string
	created    *time.Time
	resolvedAt *time.Time
	parked     bool
	runs       []Run // kept only for OR choices (hypotheses' evidence)
	backtrack  *Backtrack
	tokens     int64
	cost       float64
	unknown    int
}

// history is one pass over the journal.
type history struct {
	atoms        map[string]*atomLog
	actions      []string
	errors       []ErrorEntry
	lastStop     *journal.Event
	lastVerify   *journal.Event
	verifies     int
	switches     int
	lastAnalysis *time.Time
	lastDebug    *journal.Event // the last or_switch or or_exhausted
	lastProgress *time.Time
	first        time.Time
}

func (h *history) atom(id string) *atomLog {
	a := h.atoms[id]
	if a == nil {
		a = &atomLog{}
		h.atoms[id] = a
	}
	return a
}

func (h *history) action(name string) {
	if n := len(h.actions); n == 0 || h.actions[n-1] != name {
		h.actions = append(h.actions, name)
	}
}

func (h *history) fail(action, msg string, at time.Time) {
	h.errors = append(h.errors, ErrorEntry{Action: action, Message: msg, Timestamp: at})
	if len(h.errors) > 2*maxErrors {
		h.errors = append(h.errors[:0], h.errors[len(h.errors)-maxErrors:]...)
	}
}

func scanJournal(s *state.State, events []journal.Event) *history {
	h := &history{atoms: map[string]*atomLog{}}
	choices := map[string]bool{}
	if s != nil {
		for _, g := range s.ORGroups {
			for _, c := range g.Choices {
				choices[c] = true
			}
		}
	}
	if len(events) > 0 {
		h.first = events[0].Time
	}
	agents := map[string]string{}
	for i := range events {
		ev := &events[i]
		ok := ev.OK == nil || *ev.OK
		switch ev.Type {
		case journal.RunStart, journal.RunResume:
			h.action("INIT")
			a := journal.DataOf[journal.RunStartData](*ev).Agents
			if ev.Type == journal.RunResume {
				a = journal.DataOf[journal.RunResumeData](*ev).Agents
			}
			if a != nil {
				agents = a
			}
		case journal.AtomStart:
			if ev.Atom == baseCaseAtom {
				h.action(baseCaseAction(ev.Role))
				continue
			}
			h.action("DEVELOP")
			a := h.atom(ev.Atom)
			a.starts++
			if desc := agents[ev.Role]; strings.TrimSpace(desc) != "" {
				tool := strings.Fields(desc)[0]
				a.tool = tool
			}
			a.mode = "analysis"
			if ev.Role == "worker" || ev.Role == "" {
				a.mode = "write"
			}
		case journal.AtomFinish:
			h.finish(ev, ok, choices[ev.Atom])
		case journal.ParentDone:
			t := ev.Time
			h.atom(ev.Atom).resolvedAt = &t
			h.lastProgress = &t
		case journal.AddAtom, journal.Decompose:
			if !ok {
				continue
			}
			t := ev.Time
			ids := []string{}
			if ev.Type == journal.AddAtom {
				ids = append(ids, ev.Atom)
			}
			children := journal.DataOf[journal.DecomposeData](*ev).Children
			if ev.Type == journal.AddAtom {
				children = journal.DataOf[journal.AddAtomData](*ev).Children
			}
			ids = append(ids, children...)
			for _, id := range ids {
				h.atom(id).created = &t
			}
		case journal.Parked:
			h.atom(ev.Atom).parked = true
		case journal.AtomReset:
			h.atom(ev.Atom).parked = false
		case journal.ORSwitch, journal.ORExhausted:
			h.action("DEBUG")
			t := ev.Time
			h.lastAnalysis, h.lastDebug = &t, ev
			if ev.Type == journal.ORSwitch {
				h.switches++
				if failed := journal.DataOf[journal.ORSwitchData](*ev).Failed; failed != "" {
					h.atom(failed).backtrack = &Backtrack{Time: t, To: ev.Atom, Reason: ev.Reason}
				}
			} else {
				h.fail("debug", ev.Reason, ev.Time)
			}
		case journal.Verify:
			h.action("VALIDATE")
			h.lastVerify = ev
			h.verifies++
			if !ok {
				msg := "the base case failed"
				if f := journal.DataOf[journal.VerifyData](*ev).Failures; len(f) > 0 {
					msg += ": " + strings.Join(f, "; ")
				}
				h.fail("validate", msg, ev.Time)
			}
		case journal.Stop:
			h.lastStop = ev
			if ev.Reason == "completed" {
				h.action("COMPLETE")
			}
		}
	}
	if len(h.errors) > maxErrors {
		h.errors = h.errors[len(h.errors)-maxErrors:]
	}
	return h
}

// baseCaseAction is the phase of an agent run on the base case: a judge
// validates, a planner plans more work.
func baseCaseAction(role string) string {
	if role == "judge" {
		return "VALIDATE"
	}
	return "DEVELOP"
}

func (h *history) finish(ev *journal.Event, ok, choice bool) {
	if ev.Atom == baseCaseAtom {
		h.action(baseCaseAction(ev.Role))
		if !ok {
			h.fail(strings.ToLower(baseCaseAction(ev.Role)), fmt.Sprintf("base case (%s): %s", ev.Role, failureText(journal.DataOf[journal.AtomFinishData](*ev).Kind, ev.Reason)), ev.Time)
		}
		return
	}
	h.action("DEVELOP")
	a := h.atom(ev.Atom)
	a.tokens = agent.AddCount(a.tokens, ev.Tokens) // the engine's input plus output tokens, saturating
	a.cost = agent.AddCost(a.cost, ev.CostUSD)
	d := journal.DataOf[journal.AtomFinishData](*ev)
	if d.UsageUnknown {
		a.unknown++
	}
	kind := d.Kind
	if choice {
		a.runs = append(a.runs, Run{Time: ev.Time, Role: ev.Role, Attempt: ev.Attempt, OK: ok, Kind: kind, Reason: ev.Reason, DurationMS: ev.DurationMS})
	}
	if !ok {
		h.fail("develop", fmt.Sprintf("%s attempt %d (%s): %s", ev.Atom, ev.Attempt, ev.Role, failureText(kind, ev.Reason)), ev.Time)
		return
	}
	if ev.Role == "worker" || ev.Role == "" {
		t := ev.Time
		a.resolvedAt = &t
		h.lastProgress = &t
	}
}

func failureText(kind, reason string) string {
	switch {
	case kind != "" && reason != "":
		return kind + ": " + reason
	case kind != "":
		return kind
	case reason != "":
		return reason
	}
	return "failed"
}

func develop(s *state.State, h *history) Develop {
	d := Develop{Tasks: []Task{}, LastProgressAt: h.lastProgress}
	if s == nil {
		return d
	}
	counted := progressUnits(s)
	for i := range s.Atoms {
		a := &s.Atoms[i]
		t := task(s, a, h.atoms[a.ID])
		d.Tasks = append(d.Tasks, t)
		if counted[a.ID] {
			d.Total++
			if t.Status == TaskCompleted {
				d.Completed++
			}
		}
		if d.CurrentTask == nil && t.Status == TaskInProgress {
			id := a.ID
			d.CurrentTask = &id
		}
	}
	return d
}

// progressUnits are the atoms develop.total counts: an OR group is one
// unit (its selected choice, else its first), and a decomposed parent is
// left out for its children.
func progressUnits(s *state.State) map[string]bool {
	out := make(map[string]bool, len(s.Atoms))
	for i := range s.Atoms {
		out[s.Atoms[i].ID] = true
	}
	for _, d := range s.Decompositions {
		delete(out, d.Parent)
	}
	for _, g := range s.ORGroups {
		unit := g.Selected
		if unit == "" && len(g.Choices) > 0 {
			unit = g.Choices[0]
		}
		for _, c := range g.Choices {
			if c != unit {
				delete(out, c)
			}
		}
	}
	return out
}

func task(s *state.State, a *state.Atom, log *atomLog) Task {
	t := Task{
		ID:             a.ID,
		Description:    a.Description,
		Status:         taskStatus(s, a, log),
		FilesChanged:   []string{},
		DependsOn:      append([]string{}, a.DependsOn...),
		ORGroup:        a.ORGroup,
		FailedAttempts: a.Attempts,
		LastFailure:    a.LastFailure,
	}
	if b := s.Binding(a.ID); b != nil {
		t.FilesChanged = append(t.FilesChanged, b.Artifacts...)
		t.Summary = b.Summary
	}
	if log == nil {
		return t
	}
	if log.tool != "" {
		tool := log.tool
		t.Tool = &tool
	}
	if log.mode != "" {
		mode := log.mode
		t.Mode = &mode
	}
	t.CreatedAt = log.created
	if a.Status == state.StatusResolved {
		t.CompletedAt = log.resolvedAt
	}
	t.Attempts = log.starts
	t.Tokens, t.CostUSD, t.UsageUnknown = log.tokens, log.cost, log.unknown
	return t
}

func taskStatus(s *state.State, a *state.Atom, log *atomLog) string {
	switch a.Status {
	case state.StatusResolved:
		return TaskCompleted
	case state.StatusInProgress:
		return TaskInProgress
	}
	if log != nil && log.parked {
		return TaskFailed
	}
	if a.ORGroup != "" {
		if g := s.ORGroup(a.ORGroup); g != nil && slices.Contains(g.Failed, a.ID) {
			return TaskFailed
		}
	}
	return TaskPending
}

func summarize(l *Loop, ss *SkillState, h *history) *Summary {
	sum := &Summary{Iterations: l.CurrentIteration}
	if l.CompletedAt != nil && !h.first.IsZero() {
		sum.Duration = l.CompletedAt.Sub(h.first).Milliseconds()
	}
	sum.Develop = DevelopSummary{Total: ss.Develop.Total, Completed: ss.Develop.Completed}
	for _, t := range ss.Develop.Tasks {
		if t.Status == TaskFailed {
			sum.Develop.Failed++
		}
	}
	sum.Debug.Hypotheses = ss.Debug.HypothesesCount
	for _, hy := range ss.Debug.Hypotheses {
		switch hy.Status {
		case HypothesisConfirmed:
			sum.Debug.Confirmed++
		case HypothesisRejected:
			sum.Debug.Rejected++
		}
	}
	sum.Validate = ValidateSummary{Passed: ss.Validate.Passed, PassRate: ss.Validate.PassRate, Coverage: ss.Validate.Coverage}
	return sum
}
