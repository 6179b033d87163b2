package align

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/state"
)

const asking = `{"goal": "", "clarifications": ["Which port?"]}`

const proposal = `{"goal": "Add a /health endpoint", "background_intent": "Load balancers need a probe",
 "deliverables": "GET /health and a test", "clarifications": [],
 "scope": {"in": ["the HTTP server"], "out": ["metrics"]},
 "base_case": {"checklist": [
   {"item": "tests pass", "check": {"type": "command", "value": "go test ./..."}},
   {"item": "handler", "check": {"type": "file", "value": "health.go"}},
   {"item": "readable", "check": {"type": "quality", "rubric": [{"criterion": "Readability", "weight": 1, "levels": {"1": "bad", "5": "good"}}], "pass_threshold": 3.5}}]},
 "atoms": [{"id": "A1", "description": "Write the handler", "depends_on": []},
   {"id": "A2", "description": "Write the test", "depends_on": ["A1"]},
   {"id": "A3", "description": "Document it", "depends_on": ["A1", "A2"]}]}`

// script is a model that answers from a list, recording each request.
type script struct {
	answers  []string
	requests []string
}

func (s *script) Propose(_ context.Context, request string) (Proposal, error) {
	s.requests = append(s.requests, request)
	if len(s.requests) > len(s.answers) {
		return Proposal{}, errors.New("the script has no more answers")
	}
	return Parse([]byte(s.answers[len(s.requests)-1]))
}

func atomIDs(s *state.State) []string {
	var ids []string
	for _, a := range s.Atoms {
		ids = append(ids, a.ID+"<"+strings.Join(a.DependsOn, ","))
	}
	return ids
}

func TestAutoAcceptsTheProposalAsIs(t *testing.T) {
	m := &script{answers: []string{proposal}}
	out, err := Auto(context.Background(), m, "please add health", nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p := Problems(out.State); len(p) > 0 {
		t.Fatalf("the state does not pass the gate: %v", p)
	}
	if diff := cmp.Diff([]string{"A1<", "A2<A1", "A3<A1,A2"}, atomIDs(out.State)); diff != "" {
		t.Errorf("atoms (-want +got):\n%s", diff)
	}
	cl := out.State.Objective.BaseCase.Checklist
	if len(cl) != 3 || cl[0].Check.Value != "go test ./..." || cl[2].Check.Rubric[0].Levels[1].Text != "good" || *cl[2].Check.PassThreshold != 3.5 {
		t.Errorf("checklist = %+v", cl)
	}
	if !strings.Contains(out.State.Body, "please add health") || !strings.Contains(out.State.Body, "- out: metrics") {
		t.Errorf("body = %q", out.State.Body)
	}
	if got := out.State.Objective.DefinitionOfDone; !strings.Contains(got, "tests pass; handler; readable") {
		t.Errorf("definition_of_done = %q", got)
	}
}

func TestAutoAnswersQuestionsAndAppliesOverrides(t *testing.T) {
	ans, err := ParseAnswers([]byte(`
answers: ["8080"]
goal: "Serve /health on 8080"
atoms:
  - {id: B1, description: "All of it", depends_on: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	m := &script{answers: []string{asking, proposal}}
	out, err := Auto(context.Background(), m, "add health", ans, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.requests) != 2 || !strings.Contains(m.requests[1], "Q: Which port?\nA: 8080") {
		t.Fatalf("requests = %q", m.requests)
	}
	if out.State.Objective.Goal != "Serve /health on 8080" || out.State.Objective.BackgroundIntent != "Load balancers need a probe" {
		t.Errorf("objective = %+v", out.State.Objective)
	}
	if diff := cmp.Diff([]string{"B1<"}, atomIDs(out.State)); diff != "" {
		t.Errorf("atoms (-want +got):\n%s", diff)
	}
	if !strings.Contains(out.State.Body, "Which port?\n  8080") {
		t.Errorf("body lacks the answer: %q", out.State.Body)
	}
}

func TestAutoAnswersByQuestion(t *testing.T) {
	ans, err := ParseAnswers([]byte(`{"answers": {"which PORT?": "9090"}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := &script{answers: []string{asking, proposal}}
	if _, err := Auto(context.Background(), m, "r", ans, 3); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.requests[1], "A: 9090") {
		t.Fatalf("request = %q", m.requests[1])
	}
}

func TestParseAnswersRefusesUnknownKeys(t *testing.T) {
	if _, err := ParseAnswers([]byte("gaol: x\n")); err == nil || !strings.Contains(err.Error(), "gaol") {
		t.Fatalf("err = %v", err)
	}
}

func TestAutoRefusesWhatTheGateRefuses(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"cycle", `"depends_on": []}`, `"depends_on": ["A3"]}`, "cycle"},
		{"unknown dependency", `["A1", "A2"]`, `["A1", "A9"]`, "A9"},
		{"empty command", `"value": "go test ./..."`, `"value": " "`, "needs a non-empty value"},
		{"no atoms", `"atoms": [`, `"atoms": [], "x": [`, "no atoms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(proposal, tc.from, tc.to, 1)
			_, err := Auto(context.Background(), &script{answers: []string{bad}}, "r", nil, 3)
			var inv *InvalidError
			if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want an *InvalidError naming %q", err, tc.want)
			}
		})
	}
}

func TestParseRefusesWhatIsNoProposal(t *testing.T) {
	for _, raw := range []string{``, `{}`, `{"goal": 3}`, `[1]`} {
		if _, err := Parse([]byte(raw)); err == nil {
			t.Errorf("Parse(%q) = nil error", raw)
		}
	}
}

func TestParseCheck(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Item
	}{
		{"command:make test", Item{Item: "make test", Check: &Check{Type: "command", Value: "make test"}}},
		{"tests=command:FOO=1 make", Item{Item: "tests", Check: &Check{Type: "command", Value: "FOO=1 make"}}},
		{"command:FOO=1 make", Item{Item: "FOO=1 make", Check: &Check{Type: "command", Value: "FOO=1 make"}}},
		{"style=quality:readable code", Item{Item: "style", Check: &Check{Type: "quality", Criteria: "readable code"}}},
	} {
		got, err := ParseCheck(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, diff)
		}
	}
	for _, bad := range []string{"command:", "shell:true", "nothing"} {
		if _, err := ParseCheck(bad); err == nil {
			t.Errorf("ParseCheck(%q) = nil error", bad)
		}
	}
}

// The dialogue: a question answered, the goal edited, an atom removed (its
// dependants lose it), a check added, the rest accepted, then written.
func TestDialogueEditsAndAccepts(t *testing.T) {
	m := &script{answers: []string{asking, proposal}}
	input := strings.Join([]string{
		"8080",                   // Which port?
		"e", "Serve /health", "", // goal: edit, then accept
		"", "", "", "", // background, deliverables, scope in, scope out
		"e", "+lint=command:go vet ./...", "-2", "", "", // checklist: add, remove, end, accept
		"",                 // definition of done
		"e", "-A2", "", "", // atoms: remove A2, end, accept
		"y", // write
	}, "\n") + "\n"
	var out strings.Builder
	d := &Dialogue{Model: m, In: bufio.NewReader(strings.NewReader(input)), Out: &out, Rounds: 3, Target: "s.md"}
	got, err := d.Run(context.Background(), "add health")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got.State.Objective.Goal != "Serve /health" {
		t.Errorf("goal = %q", got.State.Objective.Goal)
	}
	if diff := cmp.Diff([]string{"A1<", "A3<A1"}, atomIDs(got.State)); diff != "" {
		t.Errorf("atoms (-want +got):\n%s", diff)
	}
	var items []string
	for _, it := range got.State.Objective.BaseCase.Checklist {
		items = append(items, it.Item)
	}
	if diff := cmp.Diff([]string{"tests pass", "readable", "lint"}, items); diff != "" {
		t.Errorf("checklist (-want +got):\n%s", diff)
	}
	for _, want := range []string{"1. Which port?", "removed A2 from the dependencies of A3", "passes aot gate: 3 check(s), 2 atom(s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the dialogue lacks %q:\n%s", want, out.String())
		}
	}
}

// A redone part takes only that part from the model's new answer; a
// proposal failing the gate is shown with the validator's words and fixed
// by the model.
func TestDialogueRedoAndFix(t *testing.T) {
	cyclic := strings.Replace(proposal, `"depends_on": []}`, `"depends_on": ["A3"]}`, 1)
	other := strings.Replace(proposal, "Load balancers need a probe", "Kubernetes needs a probe", 1)
	other = strings.Replace(other, "Add a /health endpoint", "SHOULD NOT BE TAKEN", 1)
	m := &script{answers: []string{cyclic, other, proposal}}
	input := strings.Join([]string{
		"",                            // goal
		"r", "mention kubernetes", "", // background: redo, then accept
		"", "", "", "", "", "", // the rest
		"f",                            // the gate fails: let the model fix it
		"", "", "", "", "", "", "", "", // review again
		"", // write
	}, "\n") + "\n"
	var out strings.Builder
	d := &Dialogue{Model: m, In: bufio.NewReader(strings.NewReader(input)), Out: &out, Rounds: 3, Target: "s.md"}
	got, err := d.Run(context.Background(), "r")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(m.requests[1], "mention kubernetes") || !strings.Contains(m.requests[1], `"background_intent"`) {
		t.Errorf("redo request = %q", m.requests[1])
	}
	if !strings.Contains(out.String(), "Kubernetes needs a probe") || strings.Contains(out.String(), "SHOULD NOT BE TAKEN") {
		t.Errorf("the redo took the wrong parts:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "does not pass aot gate:\n  - the state is invalid:") || !strings.Contains(out.String(), "cycle") {
		t.Errorf("the gate's words are not shown:\n%s", out.String())
	}
	if !strings.Contains(m.requests[2], "cycle") {
		t.Errorf("fix request = %q", m.requests[2])
	}
	if p := Problems(got.State); len(p) > 0 {
		t.Errorf("written state fails the gate: %v", p)
	}
}

func TestDialogueEndsWithItsInput(t *testing.T) {
	d := &Dialogue{Model: &script{answers: []string{proposal}}, In: bufio.NewReader(strings.NewReader("a\n")), Out: &strings.Builder{}, Rounds: 3}
	if _, err := d.Run(context.Background(), "r"); err == nil || !strings.Contains(err.Error(), "input ended") {
		t.Fatalf("err = %v", err)
	}
	d = &Dialogue{Model: &script{answers: []string{proposal}}, In: bufio.NewReader(strings.NewReader(strings.Repeat("\n", 8) + "q\n")), Out: &strings.Builder{}, Rounds: 3}
	if _, err := d.Run(context.Background(), "r"); !errors.Is(err, ErrCancelled) {
		t.Fatalf("err = %v", err)
	}
}

// fakeAgent answers an align task with a fixed answer.
type fakeAgent struct {
	raw  string
	task agent.Task
}

func (f *fakeAgent) Run(_ context.Context, t agent.Task) (agent.Result, error) {
	f.task = t
	return agent.Decode(t.Role, []byte(f.raw))
}

func TestModelRunsTheAlignRole(t *testing.T) {
	a := &fakeAgent{raw: proposal}
	m := &Model{Agent: a, Workdir: "/p", StateFile: "/p/.claude/s.md"}
	p, err := m.Propose(context.Background(), "req")
	if err != nil {
		t.Fatal(err)
	}
	if a.task.Role != agent.Align || a.task.Request != "req" || a.task.Workdir != "/p" || a.task.Attempt != 1 {
		t.Errorf("task = %+v", a.task)
	}
	b, _ := json.Marshal(a.task)
	if !strings.Contains(string(b), `"depends_on":[]`) {
		t.Errorf("task JSON = %s", b)
	}
	if p.Goal != "Add a /health endpoint" {
		t.Errorf("goal = %q", p.Goal)
	}
}
