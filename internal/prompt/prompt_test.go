package prompt

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aot-loop/aot/internal/agent"
)

func task(role agent.Role) agent.Task {
	return agent.Task{
		Role:        role,
		Atom:        agent.AtomRef{ID: "A3", Description: "add the login handler", DependsOn: []string{"A1"}},
		Objective:   agent.Objective{Goal: "users can log in", DefinitionOfDone: "go test ./auth passes"},
		Bindings:    map[string]agent.Binding{"A1": {Summary: "user table exists", Artifacts: []string{"db/users.sql"}}},
		Workdir:     "/w",
		Attempt:     2,
		LastFailure: "go test ./auth: undefined: Login",
	}
}

func TestEveryRolePromptCarriesWhatTheAgentNeeds(t *testing.T) {
	for _, role := range []agent.Role{agent.Worker, agent.Probe, agent.Planner} {
		p, err := Renderer{}.Render(task(role))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"A3", "add the login handler", "users can log in", "go test ./auth passes", "user table exists", "db/users.sql", "undefined: Login", Format(role)[:20]} {
			if !strings.Contains(p, want) {
				t.Errorf("%s prompt lacks %q:\n%s", role, want, p)
			}
		}
	}
	p, _ := Renderer{}.Render(task(agent.Probe))
	if !strings.Contains(p, "must not create, edit or delete") {
		t.Errorf("probe prompt does not forbid changes:\n%s", p)
	}
	w, _ := Renderer{}.Render(task(agent.Worker))
	if !strings.Contains(w, "List every file you changed") {
		t.Errorf("worker prompt does not ask for the changed files:\n%s", w)
	}
}

func TestAProjectTemplateOverridesTheEmbeddedOne(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "worker.tmpl"), []byte(`Custom for {{.Atom.ID}}. {{template "answer" .}}`), 0o644)
	r := Renderer{Dir: dir}
	p, err := r.Render(task(agent.Worker))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p, "Custom for A3.") || !strings.Contains(p, `"success": true`) {
		t.Fatalf("override not used: %s", p)
	}
	// Other roles keep the embedded template.
	if p, _ := r.Render(task(agent.Probe)); !strings.Contains(p, "You are a probe") {
		t.Fatalf("probe prompt = %s", p)
	}
	// A broken override names its file.
	os.WriteFile(filepath.Join(dir, "probe.tmpl"), []byte(`{{.Nope`), 0o644)
	if _, err := r.Render(task(agent.Probe)); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "probe.tmpl")) {
		t.Fatalf("err = %v", err)
	}
}

func TestJudgePromptShowsTheCheckAndTheFiles(t *testing.T) {
	tk := task(agent.Judge)
	tk.Atom = agent.AtomRef{ID: "base_case", Description: "code quality"}
	tk.Check = map[string]any{"type": "quality", "rubric": []any{map[string]any{"criterion": "Readability", "weight": 1}}, "pass_threshold": 3.5}
	tk.Files = []string{"auth/login.go"}
	p, err := Renderer{}.Render(tk)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"code quality", "Readability", "3.5", "auth/login.go", `"scores"`} {
		if !strings.Contains(p, want) {
			t.Errorf("judge prompt lacks %q", want)
		}
	}
}

func TestExtractJSONFindsTheAnswer(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"success": true}`, `{"success": true}`},
		{"I did it.\n```json\n{\"success\": true, \"artifacts\": [\"a.go\"]}\n```\n", `{"success": true, "artifacts": ["a.go"]}`},
		{`first {"x": 1} then the answer {"success": false, "summary": "nested {braces} and {\"k\": 2}", "o": {"p": 1}} done}`, `{"success": false, "summary": "nested {braces} and {\"k\": 2}", "o": {"p": 1}}`},
	} {
		got, ok := ExtractJSON(c.in)
		if !ok || string(got) != c.want {
			t.Errorf("ExtractJSON(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	for _, in := range []string{"", "no json here", "{not json}", "[1, 2]"} {
		if got, ok := ExtractJSON(in); ok {
			t.Errorf("ExtractJSON(%q) = %q, want none", in, got)
		}
	}
}

func TestSchemasAreJSON(t *testing.T) {
	for _, role := range []agent.Role{agent.Worker, agent.Probe, agent.Verifier, agent.Judge, agent.Planner} {
		var v map[string]any
		if err := json.Unmarshal(Schema(role), &v); err != nil || v["type"] != "object" {
			t.Errorf("%s schema: %v %v", role, err, v)
		}
	}
	if Schema(agent.Align) != nil {
		t.Error("align has no fixed schema")
	}
}
