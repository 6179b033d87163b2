package align

import (
	"context"
	"fmt"
	"strings"

	"github.com/aot-loop/aot/internal/agent"
)

// Proposer asks the model for a proposal given the request text.
type Proposer interface {
	Propose(ctx context.Context, request string) (Proposal, error)
}

// Model is a Proposer over an agent's align role.
type Model struct {
	Agent     agent.Agent
	Workdir   string // the project root the model may read
	StateFile string // the state file to be written (absolute)
	asked     int
}

// Propose runs one align task; each call is the next attempt.
func (m *Model) Propose(ctx context.Context, request string) (Proposal, error) {
	m.asked++
	res, err := m.Agent.Run(ctx, agent.Task{
		Role:      agent.Align,
		Atom:      agent.AtomRef{DependsOn: []string{}},
		Bindings:  map[string]agent.Binding{},
		Request:   request,
		Workdir:   m.Workdir,
		StateFile: m.StateFile,
		Attempt:   m.asked,
	})
	if err != nil {
		return Proposal{}, fmt.Errorf("the align agent failed: %w", err)
	}
	if res.UsageLimit {
		return Proposal{}, fmt.Errorf("the align agent hit a usage limit%s", retryAt(res.RetryAt))
	}
	return Parse(res.Raw)
}

func retryAt(at string) string {
	if at == "" {
		return ""
	}
	return " (it resets at " + at + ")"
}

// conversation is what the model is told: the request and the answers
// given so far.
type conversation struct {
	request string
	qa      []QA
}

func (c *conversation) text() string {
	if len(c.qa) == 0 {
		return c.request
	}
	var b strings.Builder
	b.WriteString(c.request)
	b.WriteString("\n\n## Answers to your questions\n")
	for _, q := range c.qa {
		fmt.Fprintf(&b, "\nQ: %s\nA: %s\n", oneLine(q.Question), oneLine(q.Answer))
	}
	b.WriteString("\nDo not ask these again; ask only what is still open (usually nothing).")
	return b.String()
}

// revision asks for a changed proposal: the current one, and what to change.
func (c *conversation) revision(current Proposal, what string) string {
	return c.text() + "\n\n## Your current proposal\n\n```json\n" + current.JSON() + "\n```\n\n## What to change\n\n" +
		what + "\nAnswer with the whole proposal in the same format."
}

// answerQuestions records answers to the model's questions: an empty
// answer is left out.
func (c *conversation) answer(questions, answers []string) int {
	n := 0
	for i, q := range questions {
		if i < len(answers) && strings.TrimSpace(answers[i]) != "" {
			c.qa = append(c.qa, QA{Question: q, Answer: strings.TrimSpace(answers[i])})
			n++
		}
	}
	return n
}
