package align

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/aot-loop/aot/internal/state"
)

// Answers is the non-interactive dialogue (aot align --answers FILE, YAML
// or JSON): answers to the model's questions, and parts that replace the
// model's.
//
//	answers:            # in the order asked, or a map from question to answer
//	  - "PostgreSQL"
//	goal: "..."
//	background_intent: "..."
//	deliverables: "..."
//	definition_of_done: "..."
//	scope: {in: [...], out: [...]}
//	base_case: {checklist: [{item: tests, check: {type: command, value: go test ./...}}]}
//	atoms: [{id: A1, description: "...", depends_on: []}]
type Answers struct {
	Answers          json.RawMessage `json:"answers,omitempty"`
	Goal             *string         `json:"goal,omitempty"`
	BackgroundIntent *string         `json:"background_intent,omitempty"`
	Deliverables     *string         `json:"deliverables,omitempty"`
	DefinitionOfDone *string         `json:"definition_of_done,omitempty"`
	Scope            *Scope          `json:"scope,omitempty"`
	BaseCase         *BaseCase       `json:"base_case,omitempty"`
	Atoms            []Atom          `json:"atoms,omitempty"`

	list   []string
	byText map[string]string
	next   int // the next answer of list to give
}

// ParseAnswers reads an answers file; unknown keys are mistakes.
func ParseAnswers(data []byte) (*Answers, error) {
	a := &Answers{}
	if len(bytes.TrimSpace(data)) == 0 {
		return a, nil
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, errors.New(yaml.FormatError(err, false, true))
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return a, nil
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(a); err != nil {
		return nil, fmt.Errorf("%v (keys: answers, goal, background_intent, deliverables, definition_of_done, scope, base_case, atoms)", err)
	}
	if len(a.Answers) > 0 && string(a.Answers) != "null" {
		if json.Unmarshal(a.Answers, &a.list) != nil {
			if err := json.Unmarshal(a.Answers, &a.byText); err != nil {
				return nil, errors.New("answers: want a list of answers in the order asked, or a map from question to answer")
			}
			norm := map[string]string{}
			for q, ans := range a.byText {
				norm[normQuestion(q)] = ans
			}
			a.byText = norm
		}
	}
	return a, nil
}

func normQuestion(q string) string { return strings.ToLower(oneLine(q)) }

// answersFor gives the answers to questions: by their text from a map, else
// the next ones from the list.
func (a *Answers) answersFor(questions []string) []string {
	out := make([]string, len(questions))
	for i, q := range questions {
		switch {
		case a.byText != nil:
			out[i] = a.byText[normQuestion(q)]
		case a.next < len(a.list):
			out[i] = a.list[a.next]
			a.next++
		}
	}
	return out
}

// apply replaces the parts the file gives.
func (a *Answers) apply(p *Proposal) {
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&p.Goal, a.Goal)
	set(&p.BackgroundIntent, a.BackgroundIntent)
	set(&p.Deliverables, a.Deliverables)
	set(&p.DefinitionOfDone, a.DefinitionOfDone)
	if a.Scope != nil {
		p.Scope = *a.Scope
	}
	if a.BaseCase != nil {
		p.BaseCase = *a.BaseCase
	}
	if a.Atoms != nil {
		p.Atoms = a.Atoms
	}
}

// Outcome is an agreed proposal and the state it makes.
type Outcome struct {
	Proposal Proposal
	QA       []QA
	State    *state.State
	// Open are the model's last questions nobody answered.
	Open []string
}

// Auto is the dialogue without a person: the answers (nil for none) go to
// the model, asking again at most rounds times in all, the file's parts
// replace the model's, and the result must pass the gate (an
// *InvalidError otherwise).
func Auto(ctx context.Context, p Proposer, request string, ans *Answers, rounds int) (Outcome, error) {
	c := &conversation{request: request}
	prop, err := p.Propose(ctx, c.text())
	if err != nil {
		return Outcome{}, err
	}
	for asked := 1; ans != nil && len(prop.Clarifications) > 0 && asked < rounds; asked++ {
		if c.answer(prop.Clarifications, ans.answersFor(prop.Clarifications)) == 0 {
			break
		}
		if prop, err = p.Propose(ctx, c.text()); err != nil {
			return Outcome{}, err
		}
	}
	if ans != nil {
		ans.apply(&prop)
	}
	out := Outcome{Proposal: prop, QA: c.qa, State: prop.State(request, c.qa), Open: prop.Clarifications}
	if probs := Problems(out.State); len(probs) > 0 {
		return out, &InvalidError{Problems: probs}
	}
	return out, nil
}
