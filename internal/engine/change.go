package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/state"
)

// Change is a redirect: a person's correction of a loop, applied between
// agent runs. Every part is optional; at least one must be set.
type Change struct {
	Reason string `json:"reason"` // why; recorded in the correction

	// Objective change: the trail is cleared (old OR decisions were made for another goal).
	Goal             string `json:"goal,omitempty"`
	BackgroundIntent string `json:"background_intent,omitempty"`
	Deliverables     string `json:"deliverables,omitempty"`
	DefinitionOfDone string `json:"definition_of_done,omitempty"`

	// DAG adjustment: appended to the trail when an OR choice is forced.
	AddAtoms    []state.Atom `json:"add_atoms,omitempty"`
	RemoveAtoms []string     `json:"remove_atoms,omitempty"`
	Select      []ORSelect   `json:"select,omitempty"`

	// Constraint change: nothing else is touched.
	MaxIterations      *int     `json:"max_iterations,omitempty"`
	MaxParallelAgents  *int     `json:"max_parallel_agents,omitempty"`
	MaxStallCount      *int     `json:"max_stall_count,omitempty"`
	MaxWallTime        *string  `json:"max_wall_time,omitempty"`
	MaxCostUSD         *float64 `json:"max_cost_usd,omitempty"`
	MaxTokens          *int64   `json:"max_tokens,omitempty"`
	MaxAttemptsPerAtom *int     `json:"max_attempts_per_atom,omitempty"`

	// Bindings override: only these atoms' bindings are cleared and the atoms
	// are redone (reset to pending).
	ClearBindings []string `json:"clear_bindings,omitempty"`
}

// ORSelect forces the choice of an OR group.
type ORSelect struct {
	Group  string `json:"group"`
	Choice string `json:"choice"`
}

func (c *Change) objective() bool {
	return c.Goal != "" || c.BackgroundIntent != "" || c.Deliverables != "" || c.DefinitionOfDone != ""
}

func (c *Change) dagAdjustment() bool {
	return len(c.AddAtoms)+len(c.RemoveAtoms)+len(c.Select) > 0
}

func (c *Change) constraints() bool {
	return c.MaxIterations != nil || c.MaxParallelAgents != nil || c.MaxStallCount != nil || c.MaxWallTime != nil ||
		c.MaxCostUSD != nil || c.MaxTokens != nil || c.MaxAttemptsPerAtom != nil
}

// Empty reports whether the change asks for nothing.
func (c *Change) Empty() bool {
	return !c.objective() && !c.dagAdjustment() && !c.constraints() && len(c.ClearBindings) == 0
}

// ErrEmptyChange is returned for a redirect that changes nothing.
var ErrEmptyChange = errors.New("the redirect changes nothing: give a new goal, atoms to add or remove, an OR choice, a constraint or bindings to clear")

// Apply makes the change on s and records one correction per kind of change.
// It fails without touching s when any part is invalid.
func Apply(s *state.State, c Change, now time.Time) error {
	if c.Empty() {
		return ErrEmptyChange
	}
	if strings.TrimSpace(c.Reason) == "" {
		return errors.New("a redirect needs a reason")
	}
	work := state.Clone(s)
	if err := apply(work, c, now); err != nil {
		return err
	}
	if r := state.Validate(work); !r.Valid() {
		return fmt.Errorf("the redirect would make the state invalid: %s", r.Errors[0])
	}
	state.CopyInto(s, work)
	return nil
}

func apply(s *state.State, c Change, now time.Time) error {
	ts := now.Format(time.RFC3339)
	record := func(typ, what string, trailCleared bool) {
		s.Corrections = append(s.Corrections, state.Correction{Timestamp: ts, Type: typ, Description: what + ": " + c.Reason, TrailCleared: trailCleared})
	}
	if c.objective() {
		o := &s.Objective
		var parts []string
		for _, f := range []struct {
			name string
			dst  *string
			val  string
		}{
			{"goal", &o.Goal, c.Goal},
			{"background_intent", &o.BackgroundIntent, c.BackgroundIntent},
			{"deliverables", &o.Deliverables, c.Deliverables},
			{"definition_of_done", &o.DefinitionOfDone, c.DefinitionOfDone},
		} {
			if strings.TrimSpace(f.val) != "" {
				*f.dst = f.val
				parts = append(parts, f.name)
			}
		}
		s.Trail = []state.TrailEntry{}
		record("objective_change", "changed "+strings.Join(parts, ", "), true)
	}
	if c.dagAdjustment() {
		var parts []string
		for _, id := range c.RemoveAtoms {
			if err := removeAtom(s, id, c.RemoveAtoms); err != nil {
				return err
			}
		}
		if len(c.RemoveAtoms) > 0 {
			parts = append(parts, "removed "+strings.Join(c.RemoveAtoms, ", "))
		}
		var added []string
		for _, a := range c.AddAtoms {
			if err := dag.AddAtom(s, a); err != nil {
				return err
			}
			added = append(added, a.ID)
		}
		if len(added) > 0 {
			parts = append(parts, "added "+strings.Join(added, ", "))
		}
		for _, sel := range c.Select {
			if err := dag.SwitchOR(s, sel.Group, sel.Choice, "redirect: "+c.Reason, now); err != nil {
				return err
			}
			parts = append(parts, fmt.Sprintf("selected %s in %s", sel.Choice, sel.Group))
		}
		record("dag_adjustment", strings.Join(parts, "; "), false)
	}
	if c.constraints() {
		k := &s.Objective.Constraints
		var parts []string
		setInt := func(name string, dst *int, v *int) {
			if v != nil {
				*dst = *v
				parts = append(parts, fmt.Sprintf("%s=%d", name, *v))
			}
		}
		setInt("max_iterations", &k.MaxIterations, c.MaxIterations)
		setInt("max_parallel_agents", &k.MaxParallelAgents, c.MaxParallelAgents)
		setInt("max_stall_count", &k.MaxStallCount, c.MaxStallCount)
		setInt("max_attempts_per_atom", &k.MaxAttemptsPerAtom, c.MaxAttemptsPerAtom)
		if c.MaxWallTime != nil {
			if _, err := state.ParseDuration(*c.MaxWallTime); err != nil {
				return fmt.Errorf("max_wall_time: %w", err)
			}
			k.MaxWallTime = *c.MaxWallTime
			parts = append(parts, "max_wall_time="+*c.MaxWallTime)
		}
		if c.MaxCostUSD != nil {
			k.MaxCostUSD = *c.MaxCostUSD
			parts = append(parts, fmt.Sprintf("max_cost_usd=%g", *c.MaxCostUSD))
		}
		if c.MaxTokens != nil {
			k.MaxTokens = *c.MaxTokens
			parts = append(parts, fmt.Sprintf("max_tokens=%d", *c.MaxTokens))
		}
		record("constraint_change", "set "+strings.Join(parts, ", "), false)
	}
	if len(c.ClearBindings) > 0 {
		for _, id := range c.ClearBindings {
			a := s.Atom(id)
			if a == nil {
				return fmt.Errorf("clear binding: atom %q does not exist", id)
			}
			s.DeleteBinding(id)
			a.Status = state.StatusPending
		}
		record("bindings_override", "cleared the bindings of "+strings.Join(c.ClearBindings, ", ")+" (redone)", false)
	}
	return nil
}

// removeAtom deletes an atom and every reference to it. It refuses when an
// atom that stays depends on it.
func removeAtom(s *state.State, id string, removing []string) error {
	if s.Atom(id) == nil {
		return fmt.Errorf("remove atom: atom %q does not exist", id)
	}
	for _, a := range s.Atoms {
		if a.ID != id && !slices.Contains(removing, a.ID) && slices.Contains(a.DependsOn, id) {
			return fmt.Errorf("remove atom %s: %s depends on it (remove or change %s too)", id, a.ID, a.ID)
		}
	}
	s.Atoms = slices.DeleteFunc(s.Atoms, func(a state.Atom) bool { return a.ID == id })
	s.DeleteBinding(id)
	for i := range s.ORGroups {
		g := &s.ORGroups[i]
		g.Choices = slices.DeleteFunc(g.Choices, func(x string) bool { return x == id })
		g.Failed = slices.DeleteFunc(g.Failed, func(x string) bool { return x == id })
		if g.Selected == id {
			g.Selected = ""
			for _, c := range g.Choices {
				if !slices.Contains(g.Failed, c) {
					g.Selected = c
					break
				}
			}
		}
	}
	s.ORGroups = slices.DeleteFunc(s.ORGroups, func(g state.ORGroup) bool { return len(g.Choices) == 0 })
	for i := range s.Decompositions {
		d := &s.Decompositions[i]
		d.Children = slices.DeleteFunc(d.Children, func(x string) bool { return x == id })
	}
	s.Decompositions = slices.DeleteFunc(s.Decompositions, func(d state.Decomposition) bool {
		return d.Parent == id || len(d.Children) == 0
	})
	return nil
}
