//go:build !windows

package verify

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/state"
)

func cmdItem(name, typ, value string, line int) state.ChecklistItem {
	return state.ChecklistItem{Item: name, Check: &state.Check{Type: typ, Value: value, Line: line + 1}, Line: line}
}

func group(name string, line int, items ...state.ChecklistItem) state.ChecklistItem {
	return state.ChecklistItem{Item: name, Group: items, HasGroup: true, Line: line}
}

func anyOf(name string, line int, items ...state.ChecklistItem) state.ChecklistItem {
	return state.ChecklistItem{Item: name, AnyOf: items, HasAnyOf: true, Line: line}
}

func quality(name string, line int) state.ChecklistItem {
	th := 3.5
	return state.ChecklistItem{Item: name, Line: line,
		Check: &state.Check{Type: state.CheckQuality, Criteria: "readable code", PassThreshold: &th, Line: line + 1}}
}

func checklist(items ...state.ChecklistItem) *state.BaseCase {
	return &state.BaseCase{Checklist: items, HasChecklist: true}
}

func TestBaseCaseNested(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	bc := checklist(
		cmdItem("builds", "command", "true", 1),
		group("docs", 3,
			cmdItem("readme", "file", "README.md", 4),
			cmdItem("no junk", "not_file", "*.tmp", 6),
			anyOf("either", 8,
				cmdItem("first", "command", "exit 4", 9),
				cmdItem("second", "not_command", "exit 1", 11),
				cmdItem("third", "command", "touch third-ran", 13),
			),
		),
		anyOf("none", 20, cmdItem("a", "command", "false", 21), cmdItem("b", "file", "missing", 23)),
	)
	got, err := BaseCase(context.Background(), bc, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := Report{
		Passed: false,
		Checklist: []ItemResult{
			{Item: "builds", Type: "command", Passed: true, Evidence: "Command exited with code 0 (success)", Line: 1},
			{Item: "docs", Passed: true, Evidence: "AND group: 3/3 passed", Line: 3, GroupResults: []ItemResult{
				{Item: "readme", Type: "file", Passed: true, Evidence: "File exists (2B): README.md", Line: 4},
				{Item: "no junk", Type: "not_file", Passed: true, Evidence: "No files match pattern (as expected): *.tmp", Line: 6},
				{Item: "either", Passed: true, Evidence: "OR group: 1/3 passed (need 1); 1 not evaluated", Line: 8, AnyOfResults: []ItemResult{
					{Item: "first", Type: "command", Evidence: "Command exited with code 4 (failure)", Line: 9},
					{Item: "second", Type: "not_command", Passed: true, Evidence: "Command exited with code 1 (expected non-zero)", Line: 11},
				}},
			}},
			{Item: "none", Evidence: "OR group: 0/2 passed (need 1)", Line: 20, AnyOfResults: []ItemResult{
				{Item: "a", Type: "command", Evidence: "Command exited with code 1 (failure)", Line: 21},
				{Item: "b", Type: "file", Evidence: "Path not found: missing", Line: 23},
			}},
		},
		Skipped: []Skipped{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, "third-ran")); err == nil {
		t.Error("any_of went on after an item passed")
	}
}

func TestBaseCasePassesWhenEverythingPasses(t *testing.T) {
	bc := checklist(cmdItem("ok", "command", "true", 1), group("g", 2, cmdItem("neg", "not_command", "false", 3)))
	got, err := BaseCase(context.Background(), bc, Options{Dir: t.TempDir()})
	if err != nil || !got.Passed {
		t.Fatalf("%+v, %v", got, err)
	}
}

func TestBaseCaseFailedCommandKeepsOutputAsEvidence(t *testing.T) {
	bc := checklist(cmdItem("tests", "command", "echo 'FAIL: TestX'; exit 1", 1))
	got, err := BaseCase(context.Background(), bc, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if ev := got.Checklist[0].Evidence; !strings.Contains(ev, "code 1 (failure)") || !strings.Contains(ev, "FAIL: TestX") {
		t.Fatalf("evidence %q", ev)
	}
}

func TestBaseCaseLegacy(t *testing.T) {
	bc := &state.BaseCase{Legacy: &state.Check{Type: "command", Value: "true", Line: 7}}
	got, err := BaseCase(context.Background(), bc, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := Report{Passed: true, Skipped: []Skipped{}, Checklist: []ItemResult{
		{Item: "base_case", Type: "command", Passed: true, Evidence: "Command exited with code 0 (success)", Line: 7},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}

	_, err = BaseCase(context.Background(), &state.BaseCase{Legacy: &state.Check{Type: "command", Value: " ", Line: 7}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "line 7") || !strings.Contains(err.Error(), "empty value") {
		t.Fatalf("empty legacy command: %v", err)
	}
}

func TestBaseCaseErrors(t *testing.T) {
	tests := []struct {
		name string
		bc   *state.BaseCase
		want []string // substrings of the error
	}{
		{"nil", nil, []string{"no base case"}},
		{"absent", &state.BaseCase{}, []string{"no base case"}},
		{"empty checklist", &state.BaseCase{HasChecklist: true}, []string{"checklist is empty"}},
		{"empty group", checklist(cmdItem("ok", "command", "true", 1), group("build", 12)), []string{`"build"`, "line 12", "empty group"}},
		{"empty any_of", checklist(group("outer", 2, anyOf("alts", 14))), []string{`"alts"`, "line 14", "empty any_of"}},
		{"empty command", checklist(group("g", 2, cmdItem("lint", "command", "", 30))), []string{`"lint"`, "line 31", "command check with an empty value"}},
		{"empty not_file", checklist(cmdItem("clean", "not_file", "", 5)), []string{`"clean"`, "line 6", "empty value"}},
		{"unknown type", checklist(cmdItem("odd", "shell", "true", 8)), []string{`"odd"`, "line 9", `unknown check type "shell"`}},
		{"no type", checklist(cmdItem("odd", "", "true", 8)), []string{`"odd"`, "line 9", "without a type"}},
		{"nothing", checklist(state.ChecklistItem{Item: "bare", Line: 3}), []string{`"bare"`, "line 3", "no check, group or any_of"}},
		{"two kinds", checklist(state.ChecklistItem{Item: "both", Line: 4, Check: &state.Check{Type: "command", Value: "true"},
			Group: []state.ChecklistItem{cmdItem("x", "command", "true", 5)}, HasGroup: true}), []string{`"both"`, "line 4", "more than one"}},
		{"bad timeout", checklist(state.ChecklistItem{Item: "slow", Line: 4, Check: &state.Check{Type: "command", Value: "true", Timeout: "soon", Line: 5}}),
			[]string{`"slow"`, "line 5", "timeout"}},
		{"quality without criteria", checklist(state.ChecklistItem{Item: "q", Line: 4, Check: &state.Check{Type: "quality", Line: 5}}),
			[]string{`"q"`, "line 5", "criteria"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// A valid first item must not run when a later one is malformed.
			if tt.bc != nil && len(tt.bc.Checklist) > 0 {
				tt.bc.Checklist = append([]state.ChecklistItem{cmdItem("first", "command", "touch ran", 0)}, tt.bc.Checklist...)
			}
			_, err := BaseCase(context.Background(), tt.bc, Options{Dir: dir})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if _, serr := os.Stat(filepath.Join(dir, "ran")); serr == nil {
				t.Error("a check ran before the base case was found malformed")
			}
		})
	}
}

func TestBaseCaseWithoutJudgeSkips(t *testing.T) {
	bc := checklist(
		cmdItem("ok", "command", "true", 1),
		quality("Code Quality", 3),
		group("deep", 6, group("deeper", 7, cmdItem("claim", "assertion", "the API is documented", 8))),
		anyOf("alt", 12, quality("nice", 13), cmdItem("fallback", "command", "true", 15)),
	)
	got, err := BaseCase(context.Background(), bc, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	wantSkipped := []Skipped{
		{Item: "Code Quality", Type: "quality", Reason: "needs a judge"},
		{Item: "claim", Type: "assertion", Reason: "needs a judge"},
	}
	if diff := cmp.Diff(wantSkipped, got.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if got.Passed {
		t.Error("passed with undecided checks")
	}
	q := got.Checklist[1]
	if q.Passed || !q.NeedsJudge || q.Type != "quality" || !strings.Contains(q.Evidence, `(threshold 3.5) "readable code"`) {
		t.Errorf("quality item %+v", q)
	}
	deep := got.Checklist[2]
	if deep.Passed || !deep.NeedsJudge || !deep.GroupResults[0].NeedsJudge || !deep.GroupResults[0].GroupResults[0].NeedsJudge {
		t.Errorf("nested assertion did not hold its groups undecided: %+v", deep)
	}
	if alt := got.Checklist[3]; !alt.Passed || alt.NeedsJudge || len(alt.AnyOfResults) != 2 {
		t.Errorf("any_of satisfied by a mechanical check: %+v", alt)
	}
}

func TestBaseCaseSkippedIsNeverNull(t *testing.T) {
	got, err := BaseCase(context.Background(), checklist(cmdItem("ok", "command", "true", 1)), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(got)
	if !strings.Contains(string(data), `"skipped":[]`) {
		t.Fatalf("%s", data)
	}
}

type fakeJudge struct {
	verdicts map[string]bool
	err      error
	calls    []string
}

func (f *fakeJudge) Judge(_ context.Context, item string, c *state.Check) (bool, string, error) {
	f.calls = append(f.calls, item+"/"+c.Type)
	if f.err != nil {
		return false, "", f.err
	}
	return f.verdicts[item], "judged " + item, nil
}

func TestBaseCaseWithJudge(t *testing.T) {
	bc := checklist(quality("style", 1), group("g", 3, cmdItem("claim", "assertion", "it works", 4)))

	j := &fakeJudge{verdicts: map[string]bool{"style": true, "claim": true}}
	got, err := BaseCase(context.Background(), bc, Options{Dir: t.TempDir(), Judge: j})
	if err != nil || !got.Passed || len(got.Skipped) != 0 {
		t.Fatalf("%+v, %v", got, err)
	}
	if diff := cmp.Diff([]string{"style/quality", "claim/assertion"}, j.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if ev := got.Checklist[0].Evidence; ev != "judged style" {
		t.Errorf("evidence %q", ev)
	}

	j = &fakeJudge{verdicts: map[string]bool{"style": true}}
	got, _ = BaseCase(context.Background(), bc, Options{Dir: t.TempDir(), Judge: j})
	if got.Passed || got.Checklist[1].Passed || got.Checklist[1].NeedsJudge {
		t.Errorf("a rejected assertion: %+v", got)
	}

	j = &fakeJudge{err: errors.New("model unavailable")}
	got, _ = BaseCase(context.Background(), bc, Options{Dir: t.TempDir(), Judge: j})
	if got.Passed || len(got.Skipped) != 2 || !strings.Contains(got.Skipped[0].Reason, "model unavailable") {
		t.Errorf("a failing judge: %+v", got)
	}
}

func TestBaseCaseTimeouts(t *testing.T) {
	own := cmdItem("own", "command", "sleep 10", 1)
	own.Check.Timeout = "200ms"
	bc := checklist(own, cmdItem("default", "not_command", "sleep 10", 3))
	start := time.Now()
	got, err := BaseCase(context.Background(), bc, Options{Dir: t.TempDir(), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	for i, want := range []string{"timed out after 200ms", "timed out after 300ms"} {
		if r := got.Checklist[i]; r.Passed || !strings.Contains(r.Evidence, want) {
			t.Errorf("item %d: %+v", i, r)
		}
	}
}

func TestBaseCaseCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := BaseCase(ctx, checklist(cmdItem("ok", "command", "true", 1)), Options{Dir: t.TempDir()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}
