package engine

import (
	"context"
	"strings"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// applyPlan adds a planner's atoms and decompositions. Each is applied on its
// own; an invalid one is skipped and journaled, never half-applied. They may
// refer to each other in any order: new atoms to the children of a
// decomposition, children to new atoms, new atoms to each other. What fails
// only for a dependency not added yet is tried again once something else was
// added; cycles and unknown ids are still refused.
func (e *engine) applyPlan(forAtom string, res agent.Result) int {
	n := 0
	decs := res.Decompositions
	props := res.Atoms
	decErrs := make([]error, len(decs))
	atomErrs := make([]error, len(props))
	for {
		added := 0
		var laterD []agent.PlannedDecomposition
		var laterDErr []error
		for _, d := range decs {
			kids := make([]state.Atom, 0, len(d.Children))
			for _, c := range d.Children {
				kids = append(kids, state.Atom{ID: c.ID, Description: c.Description, DependsOn: c.DependsOn})
			}
			parent := d.Parent
			if parent == "" {
				parent = forAtom
			}
			if _, err := dag.Decompose(e.s, parent, kids, nonBlank(d.Reason, "planner: "+parent+" failed")); err != nil {
				laterD, laterDErr = append(laterD, d), append(laterDErr, err)
				continue
			}
			e.event(journal.Event{Atom: parent, OK: journal.Bool(true)}.With(journal.DecomposeData{Children: ids(kids)}))
			e.say("planner split %s into %s", parent, strings.Join(ids(kids), ", "))
			added++
		}
		batch := make([]state.Atom, len(props))
		for i, p := range props {
			batch[i] = state.Atom{ID: p.ID, Description: p.Description, DependsOn: p.DependsOn, ORGroup: p.ORGroup}
		}
		var laterA []agent.PlannedAtom
		var laterAErr []error
		for i, err := range dag.AddAtoms(e.s, batch) {
			p := props[i]
			if err != nil {
				laterA, laterAErr = append(laterA, p), append(laterAErr, err)
				continue
			}
			e.event(journal.Event{Type: journal.AddAtom, Atom: p.ID, OK: journal.Bool(true)})
			e.say("planner added %s: %s", p.ID, dag.OneLine(p.Description, 60))
			added++
		}
		n += added
		decs, decErrs, props, atomErrs = laterD, laterDErr, laterA, laterAErr
		if added == 0 || len(decs)+len(props) == 0 {
			break
		}
	}
	for i, d := range decs {
		parent := nonBlank(d.Parent, forAtom)
		e.event(journal.Event{Type: journal.Decompose, Atom: parent, OK: journal.Bool(false), Reason: decErrs[i].Error()})
		e.say("planner's split of %s refused: %v", parent, decErrs[i])
	}
	for i, p := range props {
		e.event(journal.Event{Type: journal.AddAtom, Atom: p.ID, OK: journal.Bool(false), Reason: atomErrs[i].Error()})
		e.say("planner's atom %s refused: %v", p.ID, atomErrs[i])
	}
	if n > 0 {
		e.expanded = true
		e.structural()
	}
	return n
}

func ids(list []state.Atom) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.ID
	}
	return out
}

// plan asks the planner for new atoms after the base case failed with
// nothing left to do. What it adds is the next iteration's work.
func (e *engine) plan(ctx context.Context, forAtom string, failures []string) {
	t := agent.Task{
		Role:      agent.Planner,
		Atom:      agent.AtomRef{ID: "base_case", Description: "the base case failed; propose atoms that fix it", DependsOn: []string{}},
		Objective: agent.Objective{Goal: e.s.Objective.Goal, BackgroundIntent: e.s.Objective.BackgroundIntent, Deliverables: e.s.Objective.Deliverables, DefinitionOfDone: e.s.Objective.DefinitionOfDone},
		Bindings:  map[string]agent.Binding{},
		Workdir:   e.readDir(),
		Attempt:   e.s.Control.Iteration + 1,
		StateFile: e.opts.StateFile,
		Failures:  failures,
	}
	e.event(journal.Event{Type: journal.AtomStart, Atom: "base_case", Role: string(agent.Planner)})
	res, err, dur := e.host.RunAgent(ctx, t)
	e.addUsage(res.Usage, err)
	ev := journal.Event{Type: journal.AtomFinish, Atom: "base_case", Role: string(agent.Planner), OK: journal.Bool(err == nil), DurationMS: dur.Milliseconds()}
	UsageFields(&ev, res, err)
	if err != nil {
		ev.Reason = err.Error()
		e.event(ev)
		e.say("planner failed: %v", err)
		return
	}
	e.event(ev)
	if e.applyPlan(forAtom, res) == 0 {
		e.say("the planner proposed nothing usable")
	}
}
