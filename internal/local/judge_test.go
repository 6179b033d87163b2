//go:build unix

package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// The judge tests run the engine with a real agent process: a worker that
// builds A, and a judge that keeps the task it got in judge-task.json and
// answers what the test wrote to judge-answer.json. The base case is "A is
// built" plus the judged check under test.

func judgeProject(t *testing.T, check *state.Check, answer string) (path, dir string, ag *agent.Exec) {
	t.Helper()
	path, dir, _ = scriptProject(t, []string{"A"}, "", func(s *state.State) {
		s.Objective.BaseCase = &state.BaseCase{HasChecklist: true, Checklist: []state.ChecklistItem{
			{Item: "built", Check: &state.Check{Type: state.CheckCommand, Value: "test -f A.ok"}},
			{Item: "judged", Check: check},
		}}
	})
	if err := os.WriteFile(filepath.Join(dir, "judge-answer.json"), []byte(answer), 0o644); err != nil {
		t.Fatal(err)
	}
	ag = execAgent(dir, `
case "$AOT_ROLE" in
judge) cat > judge-task.json; cat judge-answer.json ;;
worker) `+succeed+` ;;
*) echo '{"feasible": true, "atoms": []}' ;;
esac
`)
	return path, dir, ag
}

// runJudged runs the loop for at most two iterations: a check that does
// not pass stops it on max_iterations with the check among the failures.
func runJudged(t *testing.T, path string, ag agent.Agent, confirm func(ctx context.Context, item, evidence string) (bool, error)) engine.Outcome {
	t.Helper()
	return runEngine(t, path, ag, func(o *Options) {
		o.MaxIterations = 2
		o.Confirm = confirm
	})
}

// judgeEvents are the judge's journal events (one per check it ruled on).
func judgeEvents(t *testing.T, path string) []journal.Event {
	t.Helper()
	var out []journal.Event
	for _, ev := range events(t, path, journal.AtomFinish) {
		if ev.Role == string(agent.Judge) {
			out = append(out, ev)
		}
	}
	if len(out) == 0 {
		t.Fatal("the judge was never asked")
	}
	return out
}

func rubric(weights ...float64) []state.RubricCriterion {
	names := []string{"Readability", "Design", "Tests"}
	var out []state.RubricCriterion
	for i, w := range weights {
		out = append(out, state.RubricCriterion{Criterion: names[i], Weight: w, Levels: []state.RubricLevel{{Score: 1, Text: "poor"}, {Score: 5, Text: "great"}}})
	}
	return out
}

func threshold(x float64) *float64 { return &x }

func TestJudgeWeightedAverageDecidesAQualityCheckNotTheJudgesVerdict(t *testing.T) {
	// Weights 0.4 and 0.4 add up to 0.8: the average is normalised by their
	// sum, so 4 and 3 make exactly the threshold, 3.5. The judge said
	// "passed": false; aot does the arithmetic and completes.
	check := &state.Check{Type: state.CheckQuality, Rubric: rubric(0.4, 0.4), PassThreshold: threshold(3.5)}
	path, _, ag := judgeProject(t, check, `{"passed": false, "evidence": "decent overall", "scores": [
		{"criterion": "Readability", "score": 4, "rationale": "clear names"},
		{"criterion": "design", "score": 3, "rationale": "some coupling"}]}`)
	out := runJudged(t, path, ag, nil)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	ev := judgeEvents(t, path)
	want := "weighted 3.5 >= 3.5: Readability 4 (clear names), Design 3 (some coupling); the judge: decent overall"
	if got := ev[len(ev)-1].Data["evidence"]; got != want {
		t.Fatalf("judge evidence = %q\nwant %q", got, want)
	}
	if !*ev[len(ev)-1].OK {
		t.Fatalf("judge event not ok: %+v", ev[len(ev)-1])
	}
}

func TestJudgeAverageBelowTheThresholdFailsWithTheRationaleAsEvidence(t *testing.T) {
	// 0.3×4 + 0.5×3 over 0.8 is 3.375: under 3.5 though the judge said passed.
	check := &state.Check{Type: state.CheckQuality, Rubric: rubric(0.3, 0.5), PassThreshold: threshold(3.5)}
	path, _, ag := judgeProject(t, check, `{"passed": true, "scores": [
		{"criterion": "Readability", "score": 4, "rationale": "clear names"},
		{"criterion": "Design", "score": 3, "rationale": "a god object in store.go"}]}`)
	out := runJudged(t, path, ag, nil)
	if out.Reason == engine.Completed {
		t.Fatalf("completed on a failing quality check: %+v", out)
	}
	want := "judged: weighted 3.38 < 3.5: Readability 4 (clear names), Design 3 (a god object in store.go)"
	if diff := cmp.Diff([]string{want}, out.Failures); diff != "" {
		t.Fatalf("failures (-want +got):\n%s", diff)
	}
	v := events(t, path, journal.Verify)
	if got := fmt.Sprint(v[len(v)-1].Data["failures"]); !strings.Contains(got, "a god object in store.go") {
		t.Fatalf("verify event failures = %s", got)
	}
}

func TestJudgeWithoutWeightsCountsCriteriaEqually(t *testing.T) {
	check := &state.Check{Type: state.CheckQuality, Rubric: rubric(2, 2, 2)} // no threshold: 3
	path, _, ag := judgeProject(t, check, `{"passed": false, "scores": [
		{"criterion": "Readability", "score": 2}, {"criterion": "Design", "score": 3}, {"criterion": "Tests", "score": 4}]}`)
	out := runJudged(t, path, ag, nil)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	ev := judgeEvents(t, path)
	if got, want := ev[len(ev)-1].Data["evidence"], "weighted 3 >= 3: Readability 2, Design 3, Tests 4"; got != want {
		t.Fatalf("judge evidence = %q, want %q", got, want)
	}
}

func TestJudgeInvalidAnswersLeaveTheCheckUndecided(t *testing.T) {
	tests := []struct {
		name, answer, reason string
	}{
		{"missing criterion", `{"passed": true, "scores": [{"criterion": "Readability", "score": 5}]}`,
			`it gave no score for the criterion "Design"`},
		{"score out of range", `{"passed": true, "scores": [{"criterion": "Readability", "score": 5}, {"criterion": "Design", "score": 7}]}`,
			`"Design" scored 7; a score is from 1 to 5`},
		{"unknown criterion", `{"passed": true, "scores": [{"criterion": "Readability", "score": 5}, {"criterion": "Design", "score": 4}, {"criterion": "Speed", "score": 5}]}`,
			`it scored "Speed", which is not a criterion of the rubric`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := &state.Check{Type: state.CheckQuality, Rubric: rubric(1, 1), PassThreshold: threshold(3)}
			path, _, ag := judgeProject(t, check, tt.answer)
			out := runJudged(t, path, ag, nil)
			if out.Reason == engine.Completed {
				t.Fatalf("completed on an invalid judge answer: %+v", out)
			}
			want := "judged: not judged: the judge could not decide: the judge's answer is invalid: " + tt.reason
			if diff := cmp.Diff([]string{want}, out.Failures); diff != "" {
				t.Fatalf("failures (-want +got):\n%s", diff)
			}
			ev := judgeEvents(t, path)
			if *ev[0].OK || !strings.Contains(fmt.Sprint(ev[0].Data["error"]), tt.reason) {
				t.Fatalf("judge event = %+v", ev[0])
			}
		})
	}
}

func TestJudgeSeesOnlyTheFilesInScopeAndTheCheck(t *testing.T) {
	check := &state.Check{Type: state.CheckQuality, Criteria: "the Go code reads well", Scope: "**/*.go"}
	path, dir, ag := judgeProject(t, check, `{"passed": false, "score": 4, "evidence": "short functions"}`)
	for _, f := range []string{"src/a.go", "src/b/c.go", "src/notes.txt", ".git/hooks/x.go", ".claude/aot-loop/logs/y.go"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := runJudged(t, path, ag, nil)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "judge-task.json"))
	if err != nil {
		t.Fatal(err)
	}
	var task agent.Task
	if err := json.Unmarshal(data, &task); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"src/a.go", "src/b/c.go"}, task.Files); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}
	if task.Role != agent.Judge || task.Workdir != dir || len(task.Bindings) != 0 {
		t.Fatalf("task = role %s, workdir %s, bindings %v", task.Role, task.Workdir, task.Bindings)
	}
	if got := fmt.Sprint(task.Check); !strings.Contains(got, "scope:**/*.go") || !strings.Contains(got, "criteria:the Go code reads well") {
		t.Fatalf("check = %s", got)
	}
	ev := judgeEvents(t, path)
	if got, want := ev[len(ev)-1].Data["evidence"], "score 4 >= 3; the judge: short functions"; got != want {
		t.Fatalf("judge evidence = %q, want %q", got, want)
	}
}

func TestJudgeScopeMatchingNothingFailsWithoutAskingTheJudge(t *testing.T) {
	check := &state.Check{Type: state.CheckQuality, Criteria: "the TypeScript reads well", Scope: "src/**/*.ts"}
	path, dir, ag := judgeProject(t, check, `{"passed": true, "score": 5}`)
	out := runJudged(t, path, ag, nil)
	if diff := cmp.Diff([]string{`judged: scope "src/**/*.ts" matches no files: nothing to judge`}, out.Failures); diff != "" {
		t.Fatalf("failures (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, "judge-task.json")); err == nil {
		t.Fatal("the judge agent was asked with nothing to judge")
	}
}

func TestJudgeScopeFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range maxScopeFiles + 50 {
		p := filepath.Join(dir, "src", fmt.Sprintf("f%03d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, scope := range []string{"src/*.go", "src", "./src/**"} {
		files, truncated, err := scopeFiles(dir, scope)
		if err != nil || len(files) != maxScopeFiles || !truncated || files[0] != "src/f000.go" {
			t.Fatalf("scope %q: %d files (first %v), truncated %v, err %v", scope, len(files), files[:min(1, len(files))], truncated, err)
		}
	}
	if _, _, err := scopeFiles(dir, "../*"); err == nil {
		t.Fatal("a scope outside the project was accepted")
	}
}

func TestJudgeScoreArithmetic(t *testing.T) {
	tests := []struct {
		name     string
		check    state.Check
		res      agent.Result
		passed   bool
		evidence string
	}{
		{"exactly the threshold", state.Check{Rubric: rubric(0.4, 0.4), PassThreshold: threshold(3.5)},
			agent.Result{Scores: []agent.Score{{Criterion: "Readability", Score: 4}, {Criterion: "Design", Score: 3}}},
			true, "weighted 3.5 >= 3.5: Readability 4, Design 3"},
		{"just under the threshold", state.Check{Rubric: rubric(0.6, 0.4), PassThreshold: threshold(3.5)},
			agent.Result{Passed: true, Scores: []agent.Score{{Criterion: "Readability", Score: 3}, {Criterion: "Design", Score: 4}}},
			false, "weighted 3.4 < 3.5: Readability 3, Design 4"},
		{"missing weights count equally", state.Check{Rubric: rubric(0, 0)},
			agent.Result{Scores: []agent.Score{{Criterion: "Readability", Score: 2}, {Criterion: "Design", Score: 3}}},
			false, "weighted 2.5 < 3: Readability 2, Design 3"},
		{"fractional scores", state.Check{Rubric: rubric(1, 3), PassThreshold: threshold(3.5)},
			agent.Result{Scores: []agent.Score{{Criterion: "Readability", Score: 4}, {Criterion: "Design", Score: 3.5, Rationale: "ok"}}},
			true, "weighted 3.63 >= 3.5: Readability 4, Design 3.5 (ok)"},
		{"criteria, one overall score", state.Check{Criteria: "reads well", PassThreshold: threshold(3)},
			agent.Result{Scores: []agent.Score{{Criterion: "overall", Score: 2, Rationale: "long functions"}}},
			false, "score 2 < 3: overall 2 (long functions)"},
		{"criteria, several scores averaged", state.Check{Criteria: "short, named well"},
			agent.Result{Scores: []agent.Score{{Criterion: "short", Score: 3}, {Criterion: "names", Score: 4}}},
			true, "average 3.5 >= 3: short 3, names 4"},
		{"criteria, the judge's single score", state.Check{Criteria: "reads well", PassThreshold: threshold(4)},
			agent.Result{Score: 4, Evidence: "fine"},
			true, "score 4 >= 4; the judge: fine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check.Type = state.CheckQuality
			passed, evidence, err := scoreQuality(&tt.check, tt.res)
			if err != nil || passed != tt.passed || evidence != tt.evidence {
				t.Fatalf("got %v %q %v, want %v %q", passed, evidence, err, tt.passed, tt.evidence)
			}
		})
	}
	long := strings.Repeat("why ", 3000)
	_, evidence, err := scoreQuality(&state.Check{Type: state.CheckQuality, Criteria: "x"}, agent.Result{Score: 3, Evidence: long})
	if err != nil || len(evidence) > maxJudgeEvidence || !strings.HasSuffix(evidence, "…") {
		t.Fatalf("evidence of %d bytes (err %v), want at most %d", len(evidence), err, maxJudgeEvidence)
	}
	if _, _, err := scoreQuality(&state.Check{Type: state.CheckQuality, Rubric: rubric(1, 1)}, agent.Result{Scores: []agent.Score{
		{Criterion: "Readability", Score: 3}, {Criterion: "readability", Score: 4}, {Criterion: "Design", Score: 4}}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a criterion scored twice: err %v", err)
	}
	if _, _, err := scoreQuality(&state.Check{Type: state.CheckQuality, Criteria: "x"}, agent.Result{Passed: true}); err == nil {
		t.Fatal("an answer without a score was taken")
	}
}

// person answers the confirmation prompts and remembers them.
type person struct {
	mu     sync.Mutex
	answer bool
	asked  []string
}

func (p *person) confirm(ctx context.Context, item, evidence string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, item+": "+evidence)
	return p.answer, nil
}

const assertionAnswer = `{"passed": true, "evidence": "the README explains setup"}`

func TestJudgeAssertionConfirmedByThePersonCompletes(t *testing.T) {
	path, _, ag := judgeProject(t, &state.Check{Type: state.CheckAssertion, Value: "the README is clear"}, assertionAnswer)
	p := &person{answer: true}
	out := runJudged(t, path, ag, p.confirm)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	if diff := cmp.Diff([]string{"judged: the README explains setup"}, p.asked); diff != "" {
		t.Fatalf("asked (-want +got):\n%s", diff)
	}
	c := events(t, path, confirmEvent)
	if len(c) != 1 || !*c[0].OK || c[0].Reason != "confirmed by the person" || c[0].Data["item"] != "judged" {
		t.Fatalf("confirm events = %+v", c)
	}
}

func TestJudgeAssertionRefusedByThePersonFailsTheCheck(t *testing.T) {
	path, _, ag := judgeProject(t, &state.Check{Type: state.CheckAssertion, Value: "the README is clear"}, assertionAnswer)
	p := &person{answer: false}
	out := runJudged(t, path, ag, p.confirm)
	if out.Reason == engine.Completed {
		t.Fatalf("completed on a refused assertion: %+v", out)
	}
	want := "judged: refused by the person (the judge said: the README explains setup)"
	if diff := cmp.Diff([]string{want}, out.Failures); diff != "" {
		t.Fatalf("failures (-want +got):\n%s", diff)
	}
	// Nothing changed after the refusal: the person is not asked again.
	if len(p.asked) != 1 {
		t.Fatalf("asked %d times: %q", len(p.asked), p.asked)
	}
	if c := events(t, path, confirmEvent); len(c) != 1 || *c[0].OK || c[0].Reason != "refused by the person" {
		t.Fatalf("confirm events = %+v", c)
	}
	// The second pass reuses the judge's ruling: the agent is asked once.
	if n := len(judgeEvents(t, path)); n != 1 {
		t.Fatalf("judge asked %d times", n)
	}
}

func TestJudgeAssertionWithoutATerminalIsRecordedUnconfirmed(t *testing.T) {
	path, _, ag := judgeProject(t, &state.Check{Type: state.CheckAssertion, Value: "the README is clear"}, assertionAnswer)
	out := runJudged(t, path, ag, nil)
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	ev := judgeEvents(t, path)
	if got, want := ev[len(ev)-1].Data["evidence"], "the README explains setup (unconfirmed: no terminal to ask)"; got != want {
		t.Fatalf("judge evidence = %q, want %q", got, want)
	}
	c := events(t, path, confirmEvent)
	if len(c) != 1 || c[0].Reason != "unconfirmed: no terminal to ask" || c[0].Data["item"] != "judged" {
		t.Fatalf("confirm events = %+v", c)
	}
}

func TestJudgeAssertionTheJudgeFailsIsNotPutToThePerson(t *testing.T) {
	path, _, ag := judgeProject(t, &state.Check{Type: state.CheckAssertion, Value: "the README is clear"}, `{"passed": false, "evidence": "no setup section"}`)
	p := &person{answer: true}
	out := runJudged(t, path, ag, p.confirm)
	if diff := cmp.Diff([]string{"judged: no setup section"}, out.Failures); diff != "" {
		t.Fatalf("failures (-want +got):\n%s", diff)
	}
	if len(p.asked) != 0 {
		t.Fatalf("asked %q", p.asked)
	}
}

// CheckBaseCase is the verification an aot worker runs for a Temporal
// loop: the judge's ruling and the confirmation it records come back as
// the loop's events, numbered with the loop's iteration, with what the
// judge cost, and no engine is needed to get them.
func TestCheckBaseCaseHandsBackTheJudgesEventsAndSpend(t *testing.T) {
	path, dir, ag := judgeProject(t, &state.Check{Type: state.CheckAssertion, Value: "the README is clear"}, assertionAnswer)
	if err := os.WriteFile(filepath.Join(dir, "A.ok"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := state.NewStore(path).Read()
	if err != nil {
		t.Fatal(err)
	}
	s.Control.Iteration = 3
	rep, err := CheckBaseCase(context.Background(), s, dir, ag, time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Report.Passed {
		t.Fatalf("the base case did not pass: %+v", rep.Report)
	}
	var kinds []string
	for _, ev := range rep.Events {
		if ev.Iteration != 3 || ev.Time.IsZero() {
			t.Errorf("event %s has iteration %d, time %v; want iteration 3 and a time", ev.Type, ev.Iteration, ev.Time)
		}
		kinds = append(kinds, string(ev.Type)+" "+ev.Role+" "+ev.Reason)
	}
	want := []string{"atom_finish judge judged", "confirm  unconfirmed: no terminal to ask"}
	if !slices.Equal(kinds, want) {
		t.Errorf("events = %q, want %q", kinds, want)
	}
	if rep.Unknown != 1 || rep.Usage.Tokens() != 0 {
		t.Errorf("spend = %+v, %d unknown; want the judge's one call counted as unknown", rep.Usage, rep.Unknown)
	}
}
