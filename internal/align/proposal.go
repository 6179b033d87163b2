// Package align turns a person's request into a loop's objective and first
// atoms (the original /align-goal): a model proposes, the person answers its
// questions and accepts, edits or sends back each part, and the result is a
// state that passes the gate. The dialogue reads lines and writes text; it
// knows nothing of terminals.
package align

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aot-loop/aot/internal/state"
)

// Proposal is the align role's answer (prompt.Format(agent.Align)).
type Proposal struct {
	Goal             string   `json:"goal"`
	BackgroundIntent string   `json:"background_intent"`
	Deliverables     string   `json:"deliverables"`
	DefinitionOfDone string   `json:"definition_of_done,omitempty"`
	Clarifications   []string `json:"clarifications,omitempty"`
	Scope            Scope    `json:"scope"`
	BaseCase         BaseCase `json:"base_case"`
	Atoms            []Atom   `json:"atoms"`
}

// Scope is what the work includes and leaves out; it is kept in the state
// file's Markdown body, beside the request.
type Scope struct {
	In  []string `json:"in"`
	Out []string `json:"out"`
}

// BaseCase is the checklist that decides when the loop is done.
type BaseCase struct {
	Checklist []Item `json:"checklist"`
}

// Item is one checklist entry: a check, an AND group or an OR group.
type Item struct {
	Item  string `json:"item"`
	Check *Check `json:"check,omitempty"`
	Group []Item `json:"group,omitempty"`
	AnyOf []Item `json:"any_of,omitempty"`
}

// Check is one verifiable condition, as the state contract spells it.
type Check struct {
	Type          string      `json:"type"`
	Value         string      `json:"value,omitempty"`
	Criteria      string      `json:"criteria,omitempty"`
	Rubric        []Criterion `json:"rubric,omitempty"`
	PassThreshold *float64    `json:"pass_threshold,omitempty"`
	Scope         string      `json:"scope,omitempty"`
	Timeout       string      `json:"timeout,omitempty"`
}

// Criterion is one weighted criterion of a quality rubric; Levels maps a
// score ("1".."5") to what it means.
type Criterion struct {
	Criterion   string            `json:"criterion"`
	Description string            `json:"description,omitempty"`
	Weight      float64           `json:"weight"`
	Levels      map[string]string `json:"levels,omitempty"`
}

// Atom is a first atom of the work graph.
type Atom struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	DependsOn   []string `json:"depends_on"`
}

// QA is a clarification the model asked and the person's answer.
type QA struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// defaultPassThreshold is the judge's bar when a judged check names none:
// 3 on the contract's 1-5 scale, as aot init sets it.
const defaultPassThreshold = 3.0

// Parse reads an align answer. An object with neither a goal nor a
// question is not an answer.
func Parse(raw []byte) (Proposal, error) {
	var p Proposal
	if len(raw) == 0 {
		return p, errors.New("the align agent gave no answer object")
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, fmt.Errorf("the align answer does not have the align format: %w", err)
	}
	if strings.TrimSpace(p.Goal) == "" && len(p.Clarifications) == 0 {
		return p, errors.New(`the align answer has neither a "goal" nor "clarifications"`)
	}
	return p, nil
}

// JSON is the proposal as indented JSON, for a model asked to revise it.
func (p Proposal) JSON() string {
	b, _ := json.MarshalIndent(p, "", "  ")
	return string(b)
}

// Done is the definition of done: the model's, else the checklist's items
// in words.
func (p Proposal) Done() string {
	if d := strings.TrimSpace(p.DefinitionOfDone); d != "" {
		return d
	}
	names := make([]string, 0, len(p.BaseCase.Checklist))
	for _, it := range p.BaseCase.Checklist {
		names = append(names, it.Item)
	}
	if len(names) == 0 {
		return ""
	}
	return "every check of the base case passes: " + strings.Join(names, "; ")
}

// State is the new loop's state: the objective, the first atoms, and the
// request, the answers and the scope in the Markdown body.
func (p Proposal) State(request string, qa []QA) *state.State {
	obj := state.Objective{
		Goal:             strings.TrimSpace(p.Goal),
		BackgroundIntent: strings.TrimSpace(p.BackgroundIntent),
		Deliverables:     strings.TrimSpace(p.Deliverables),
		DefinitionOfDone: p.Done(),
		BaseCase:         &state.BaseCase{Checklist: items(p.BaseCase.Checklist), HasChecklist: true},
	}
	atoms := make([]state.Atom, 0, len(p.Atoms))
	for _, a := range p.Atoms {
		deps := append([]string{}, a.DependsOn...)
		atoms = append(atoms, state.Atom{ID: strings.TrimSpace(a.ID), Description: strings.TrimSpace(a.Description), DependsOn: deps})
	}
	return state.New(obj, atoms, body(request, qa, unanswered(p.Clarifications, qa), p.Scope))
}

// unanswered are the questions of asked that qa does not answer.
func unanswered(asked []string, qa []QA) []string {
	done := map[string]bool{}
	for _, q := range qa {
		done[oneLine(q.Question)] = true
	}
	var open []string
	for _, q := range asked {
		if q = oneLine(q); q != "" && !done[q] {
			open = append(open, q)
		}
	}
	return open
}

// body is the Markdown kept under "Original Prompt".
func body(request string, qa []QA, open []string, scope Scope) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(request))
	if len(qa)+len(open) > 0 {
		b.WriteString("\n\n## Clarifications\n")
		for _, q := range qa {
			fmt.Fprintf(&b, "\n- %s\n  %s", oneLine(q.Question), oneLine(q.Answer))
		}
		for _, q := range open {
			fmt.Fprintf(&b, "\n- %s\n  (unanswered)", q)
		}
	}
	if len(scope.In)+len(scope.Out) > 0 {
		b.WriteString("\n\n## Scope\n")
		for _, s := range scope.In {
			fmt.Fprintf(&b, "\n- in: %s", oneLine(s))
		}
		for _, s := range scope.Out {
			fmt.Fprintf(&b, "\n- out: %s", oneLine(s))
		}
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func items(list []Item) []state.ChecklistItem {
	out := make([]state.ChecklistItem, 0, len(list))
	for _, it := range list {
		ci := state.ChecklistItem{Item: strings.TrimSpace(it.Item)}
		if it.Check != nil {
			ci.Check = check(*it.Check)
		}
		if it.Group != nil {
			ci.Group, ci.HasGroup = items(it.Group), true
		}
		if it.AnyOf != nil {
			ci.AnyOf, ci.HasAnyOf = items(it.AnyOf), true
		}
		if ci.Item == "" && ci.Check != nil {
			ci.Item = ci.Check.Value + ci.Check.Criteria
		}
		out = append(out, ci)
	}
	return out
}

func check(c Check) *state.Check {
	sc := &state.Check{
		Type: strings.TrimSpace(c.Type), Value: strings.TrimSpace(c.Value), Criteria: strings.TrimSpace(c.Criteria),
		PassThreshold: c.PassThreshold, Scope: c.Scope, Timeout: c.Timeout,
	}
	switch sc.Type {
	case state.CheckAssertion:
		// An assertion is judged by its words: whichever field the model
		// put them in, they are its value.
		if sc.Value == "" {
			sc.Value = sc.Criteria
		}
		fallthrough
	case state.CheckQuality:
		if sc.PassThreshold == nil {
			t := defaultPassThreshold
			sc.PassThreshold = &t
		}
	}
	for _, r := range c.Rubric {
		rc := state.RubricCriterion{Criterion: r.Criterion, Description: r.Description, Weight: r.Weight}
		for k, text := range r.Levels {
			if n, err := strconv.Atoi(strings.TrimSpace(k)); err == nil {
				rc.Levels = append(rc.Levels, state.RubricLevel{Score: n, Text: text})
			}
		}
		sort.Slice(rc.Levels, func(i, j int) bool { return rc.Levels[i].Score < rc.Levels[j].Score })
		sc.Rubric = append(sc.Rubric, rc)
	}
	return sc
}

// Problems is what keeps the proposal's state from passing aot gate, as the
// gate says it; none means it may be written.
func Problems(s *state.State) []string { return s.GateMissing() }

// InvalidError is a proposal that does not pass the gate.
type InvalidError struct{ Problems []string }

func (e *InvalidError) Error() string {
	return "the proposal does not pass aot gate: " + strings.Join(e.Problems, "; ")
}

// removeAtom drops the atom id and every dependency on it; it reports the
// atoms that lost a dependency.
func removeAtom(atoms []Atom, id string) ([]Atom, []string) {
	var out []Atom
	var touched []string
	for _, a := range atoms {
		if a.ID == id {
			continue
		}
		kept := a.DependsOn[:0:0]
		for _, d := range a.DependsOn {
			if d != id {
				kept = append(kept, d)
			}
		}
		if len(kept) != len(a.DependsOn) {
			touched = append(touched, a.ID)
		}
		a.DependsOn = kept
		out = append(out, a)
	}
	return out, touched
}

// ParseCheck reads a check as aot init's --check takes it:
// [NAME=]TYPE:VALUE.
func ParseCheck(raw string) (Item, error) {
	name, spec := "", raw
	if i := strings.IndexByte(raw, '='); i > 0 && !strings.Contains(raw[:i], ":") {
		name, spec = strings.TrimSpace(raw[:i]), raw[i+1:]
	}
	typ, value, ok := strings.Cut(spec, ":")
	typ, value = strings.TrimSpace(typ), strings.TrimSpace(value)
	if !ok || value == "" {
		return Item{}, fmt.Errorf("%q: want [NAME=]TYPE:VALUE with a non-empty value", raw)
	}
	switch typ {
	case state.CheckCommand, state.CheckNotCommand, state.CheckFile, state.CheckNotFile, state.CheckAssertion:
	case state.CheckQuality:
		if name == "" {
			name = value
		}
		return Item{Item: name, Check: &Check{Type: typ, Criteria: value}}, nil
	default:
		return Item{}, fmt.Errorf("%q: unknown check type %q (command, not_command, file, not_file, assertion, quality)", raw, typ)
	}
	if name == "" {
		name = value
	}
	return Item{Item: name, Check: &Check{Type: typ, Value: value}}, nil
}
