package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// When the base case fails with no atom left, the failing checks point at
// the work that is missing: a resolved atom is reopened (back to pending,
// its binding dropped, charged an attempt, the check's evidence as its
// last failure) when a failing check is named after it, or, when every
// atom is resolved, the check's command or path names a file the atom's
// worker claimed or its attempt changed (with a worktree per attempt the binding's artifacts are the
// files the merge changed; the claims are kept beside them). An agent that lied, or
// a later atom that broke earlier work, is caught this way and the work is
// redone; only when no atom matches is the planner asked for new atoms.

// reopen reopens the atoms the failures point at and returns how many. An
// atom is reopened at most max_attempts_per_atom times in a run.
func (e *engine) reopen(failures []string) int { return e.reopenWhere(failures, nil) }

// reopenWhere is reopen limited to the atoms keep accepts (nil: all).
func (e *engine) reopenWhere(failures []string, keep func(id string) bool) int {
	checks := map[string]string{} // item name -> what the check names
	collectChecks(e.s.Objective.BaseCase, checks)
	evidence := map[string]string{}
	for _, f := range failures {
		name, ev, _ := strings.Cut(f, ": ")
		// Nested items are "group / item": the innermost name decides.
		if i := strings.LastIndex(name, " / "); i >= 0 {
			name = name[i+3:]
		}
		evidence[name] = ev
	}
	parents := map[string]bool{}
	for _, d := range e.s.Decompositions {
		parents[d.Parent] = true // resolved through its children
	}
	// A check that names a file several resolved atoms claim does not say
	// which of them to redo: only a check that names one atom's files, or
	// is named after the atom, reopens it.
	claimants := map[string]int{}
	// While other work is unresolved (failed, parked), a check that names
	// a resolved atom's files is explained by the missing work as well as
	// by that atom: it reopens nothing then, or an atom whose work is
	// there would be redone for nothing (and fail as no_change). A check
	// named after an atom still reopens it.
	byFiles := dag.Unresolved(e.s) == 0
	for i := range e.s.Atoms {
		a := &e.s.Atoms[i]
		if a.Status != state.StatusResolved || parents[a.ID] {
			continue
		}
		if b := e.s.Binding(a.ID); b != nil {
			for item := range evidence {
				if namesAny(checks[item], e.filesOf(b)) {
					claimants[item]++
				}
			}
		}
	}
	n := 0
	for i := range e.s.Atoms {
		a := &e.s.Atoms[i]
		if a.Status != state.StatusResolved || parents[a.ID] || (keep != nil && !keep(a.ID)) {
			continue
		}
		b := e.s.Binding(a.ID)
		for item, ev := range evidence {
			if item != a.ID && (!byFiles || b == nil || claimants[item] != 1 || !namesAny(checks[item], e.filesOf(b))) {
				continue
			}
			if e.book.Reopens[a.ID] >= e.maxAttempts() {
				continue // reopened often enough: the stop will name the check
			}
			e.book.Reopens[a.ID]++
			e.book.SweepRepair = true
			why := fmt.Sprintf("the base case check %q fails after this atom was resolved: %s", item, ev)
			e.s.DeleteBinding(a.ID)
			delete(e.bindIdx, a.ID)
			e.event(journal.Event{Atom: a.ID, Reason: "reopened: " + dag.OneLine(why, 500)}.With(journal.AtomResetData{Reopens: e.book.Reopens[a.ID]}))
			e.say("%s reopened: the check %q fails (%s)", a.ID, item, dag.OneLine(ev, 80))
			a.Status = state.StatusPending
			a.LastFailure = dag.OneLine(why, 500)
			if a.ORGroup != "" {
				// An OR choice whose work does not hold backtracks to the
				// next choice, as for any failure.
				e.fail(a, why)
			} else if e.ix.Ready(a.ID) {
				// Not charged an attempt: a lie and a later atom breaking
				// this work look the same from here. Reopens are bounded
				// on their own (max_attempts_per_atom per atom and run).
				e.markReady(a.ID)
			}
			n++
			break
		}
	}
	if n > 0 {
		e.book.Gen++
		e.expanded = true // the verification found work: not a stall unless it repeats
		e.structural()
	}
	return n
}

// claim keeps the files a resolved atom's worker named.
func (e *engine) claim(id string, claimed []string) {
	if e.claims == nil {
		e.claims = map[string][]string{}
	}
	e.claims[id] = append([]string(nil), claimed...)
}

// filesOf are the files a resolved atom answers for: its binding's
// artifacts and what its worker claimed in this run.
func (e *engine) filesOf(b *state.Binding) []string {
	return append(append([]string{}, b.Artifacts...), e.claims[b.AtomID]...)
}

// collectChecks maps every checklist item's name to its check's value.
func collectChecks(bc *state.BaseCase, out map[string]string) {
	if bc == nil {
		return
	}
	if bc.Legacy != nil {
		out["base_case"] = bc.Legacy.Value
	}
	var walk func([]state.ChecklistItem)
	walk = func(items []state.ChecklistItem) {
		for _, it := range items {
			if it.Check != nil {
				out[it.Item] = it.Check.Value
			}
			walk(it.Group)
			walk(it.AnyOf)
		}
	}
	walk(bc.Checklist)
}

// namesAny reports whether a check's command or path names one of the
// files, as a whole word.
func namesAny(check string, files []string) bool {
	if check == "" {
		return false
	}
	words := strings.FieldsFunc(check, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\'' || r == '"' || r == ';' || r == '&' || r == '|' || r == '<' || r == '>' || r == '(' || r == ')'
	})
	for _, f := range files {
		f = strings.TrimPrefix(f, "./")
		if f != "" && slices.ContainsFunc(words, func(w string) bool { return strings.TrimPrefix(w, "./") == f }) {
			return true
		}
	}
	return false
}
