package ccw

import (
	"slices"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// An OR group's choices are the hypotheses of CCW's debug phase: a
// backtrack rejects one, resolving confirms it.

func debug(s *state.State, h *history) Debug {
	d := Debug{Hypotheses: []Hypothesis{}, Iteration: h.switches, LastAnalysisAt: h.lastAnalysis}
	if s == nil {
		return d
	}
	var confirmedAt time.Time
	for _, g := range s.ORGroups {
		for i, id := range g.Choices {
			hy := hypothesis(s, g, id, i+1, h.atoms[id])
			d.Hypotheses = append(d.Hypotheses, hy)
			if hy.Status != HypothesisConfirmed {
				continue
			}
			at := time.Time{}
			if log := h.atoms[id]; log != nil && log.resolvedAt != nil {
				at = *log.resolvedAt
			}
			if d.ConfirmedHypothesis == nil || !at.Before(confirmedAt) {
				hid := id
				d.ConfirmedHypothesis, confirmedAt = &hid, at
			}
		}
	}
	d.HypothesesCount = len(d.Hypotheses)
	if ev := h.lastDebug; ev != nil {
		group := journal.DataOf[journal.ORSwitchData](*ev).ORGroup
		if group == "" {
			if a := s.Atom(ev.Atom); a != nil {
				group = a.ORGroup
			}
		}
		if g := s.ORGroup(group); g != nil && !groupResolved(s, g) {
			bug := group + ": " + ev.Reason
			d.ActiveBug = &bug
		}
	}
	return d
}

func groupResolved(s *state.State, g *state.ORGroup) bool {
	for _, c := range g.Choices {
		if a := s.Atom(c); a != nil && a.Status == state.StatusResolved {
			return true
		}
	}
	return false
}

func hypothesis(s *state.State, g state.ORGroup, id string, rank int, log *atomLog) Hypothesis {
	hy := Hypothesis{ID: id, Likelihood: rank, Status: HypothesisPending, ORGroup: g.Name}
	a := s.Atom(id)
	if a != nil {
		hy.Description = a.Description
	}
	b := s.Binding(id)
	if log != nil && (len(log.runs) > 0 || log.backtrack != nil) || b != nil {
		ev := &Evidence{Runs: []Run{}}
		if log != nil {
			ev.Runs = append(ev.Runs, log.runs...)
			ev.Backtrack = log.backtrack
		}
		if b != nil {
			ev.Summary, ev.Artifacts = b.Summary, b.Artifacts
		}
		hy.Evidence = ev
	}
	var verdict string
	switch {
	case a != nil && a.Status == state.StatusResolved:
		hy.Status = HypothesisConfirmed
		verdict = "resolved"
		if b != nil && b.Summary != "" {
			verdict += ": " + b.Summary
		}
	case slices.Contains(g.Failed, id):
		hy.Status = HypothesisRejected
		verdict = rejection(a, log)
	default:
		return hy
	}
	hy.VerdictReason = &verdict
	return hy
}

// rejection says why a choice failed: its last failed run, else the
// state's last failure, else the backtrack.
func rejection(a *state.Atom, log *atomLog) string {
	if log != nil {
		for i := len(log.runs) - 1; i >= 0; i-- {
			if r := log.runs[i]; !r.OK {
				return failureText(r.Kind, r.Reason)
			}
		}
	}
	if a != nil && a.LastFailure != "" {
		return a.LastFailure
	}
	if log != nil && log.backtrack != nil && log.backtrack.Reason != "" {
		return log.backtrack.Reason
	}
	return "failed (no reason recorded)"
}
