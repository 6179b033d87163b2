// Package prompt turns a task into the text an agent CLI or a model gets:
// one template per role, embedded, which a project may override with a file
// of its own, and the exact answer format the role must end with. It also
// finds that answer again in what a model wrote.
package prompt

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/aot-loop/aot/internal/agent"
)

//go:embed templates/*.tmpl
var embedded embed.FS

// OverrideDir is where a project keeps its own role templates, relative to
// the state file's folder: ROLE.tmpl replaces the embedded one and may use
// the embedded blocks (objective, atom, bindings, retry, answer).
const OverrideDir = "aot-prompts"

// Renderer renders role prompts.
type Renderer struct {
	// Dir holds override templates (ROLE.tmpl); "" or a missing file uses
	// the embedded template.
	Dir string
}

// data is what a template sees: the task, plus the role's answer format
// and the judged check as text.
type data struct {
	agent.Task
	Format    string
	CheckText string
}

var funcs = template.FuncMap{"join": strings.Join}

// Render returns the prompt of t.
func (r Renderer) Render(t agent.Task) (string, error) {
	tmpl, err := r.template(t.Role)
	if err != nil {
		return "", err
	}
	d := data{Task: t, Format: Format(t.Role)}
	if t.Check != nil {
		b, _ := json.MarshalIndent(t.Check, "", "  ")
		d.CheckText = string(b)
	}
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, string(t.Role), d); err != nil {
		return "", fmt.Errorf("prompt for %s: %w", t.Role, err)
	}
	return strings.TrimSpace(buf.String()) + "\n", nil
}

// template parses the common blocks and the role's template, from the
// override folder when it has one.
func (r Renderer) template(role agent.Role) (*template.Template, error) {
	common, err := embedded.ReadFile("templates/common.tmpl")
	if err != nil {
		return nil, err
	}
	t, err := template.New("common").Funcs(funcs).Option("missingkey=error").Parse(string(common))
	if err != nil {
		return nil, err
	}
	name := string(role) + ".tmpl"
	src, err := embedded.ReadFile("templates/" + name)
	from := "embedded " + name
	if r.Dir != "" {
		p := filepath.Join(r.Dir, name)
		if b, ferr := os.ReadFile(p); ferr == nil {
			src, err, from = b, nil, p
		} else if !errors.Is(ferr, fs.ErrNotExist) {
			return nil, fmt.Errorf("prompt template %s: %w", p, ferr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("no prompt template for role %q", role)
	}
	if _, err := t.New(string(role)).Parse(string(src)); err != nil {
		return nil, fmt.Errorf("prompt template %s: %w", from, err)
	}
	return t, nil
}

// Format is the answer format of role, as a JSON example with its rules.
func Format(role agent.Role) string {
	switch role {
	case agent.Worker:
		return `{"success": true, "summary": "what you did, in one or two sentences", "artifacts": ["path/you/changed.go"]}
"success" is true only when the atom is done and you checked it; false with a summary of what blocked you otherwise.`
	case agent.Probe:
		return `{"feasible": true, "findings": "what you found: where the work is, what it needs, what blocks it", "cost_estimate": "small"}
"feasible" is false when the atom cannot be done as described; say why in findings.`
	case agent.Verifier:
		return `{"passed": false, "evidence": "what you checked and saw", "failures": ["criterion that does not hold: why"]}`
	case agent.Judge:
		return `{"passed": true, "scores": [{"criterion": "Readability", "score": 4, "rationale": "why, citing files"}], "evidence": "your overall reasoning"}
For a quality check, give one entry in "scores" per rubric criterion, each an integer from 1 to 5 (the rubric's levels say what each means); for an assertion, "scores" may be empty. "passed" is your verdict.`
	case agent.Planner:
		return `{"atoms": [{"id": "NEW1", "description": "one verifiable step", "depends_on": ["EXISTING_ID"]}], "decompositions": [{"parent": "A3", "reason": "why it is split", "children": [{"id": "A3a", "description": "...", "depends_on": []}]}]}
Either list may be empty, not both.`
	case agent.Align:
		return `{"goal": "...", "background_intent": "...", "deliverables": "...", "clarifications": ["question?"], "scope": {"in": ["..."], "out": ["..."]},
 "base_case": {"checklist": [{"item": "tests pass", "check": {"type": "command", "value": "go test ./..."}},
   {"item": "docs", "check": {"type": "file", "value": "docs/USAGE.md"}},
   {"item": "readable", "check": {"type": "quality", "scope": "*.go", "rubric": [{"criterion": "Readability", "weight": 1, "levels": {"1": "hard to read", "3": "mostly readable", "5": "very readable"}}], "pass_threshold": 3.5}}]},
 "atoms": [{"id": "A1", "description": "...", "depends_on": []}, {"id": "A2", "description": "...", "depends_on": ["A1"]}]}
Check types: command, not_command, file, not_file, quality, assertion.`
	}
	return `{}`
}

// Schema is a JSON Schema of role's answer, for CLIs that enforce one
// (structured output). Roles without a fixed shape have none.
func Schema(role agent.Role) []byte {
	str := map[string]any{"type": "string"}
	strs := map[string]any{"type": "array", "items": str}
	boolean := map[string]any{"type": "boolean"}
	obj := func(required []string, props map[string]any) map[string]any {
		return map[string]any{"type": "object", "required": required, "properties": props, "additionalProperties": true}
	}
	planned := obj([]string{"id", "description", "depends_on"}, map[string]any{"id": str, "description": str, "depends_on": strs, "or_group": str})
	var s map[string]any
	switch role {
	case agent.Worker:
		s = obj([]string{"success", "summary", "artifacts"}, map[string]any{"success": boolean, "summary": str, "artifacts": strs})
	case agent.Probe:
		s = obj([]string{"feasible", "findings"}, map[string]any{"feasible": boolean, "findings": str})
	case agent.Verifier:
		s = obj([]string{"passed", "evidence"}, map[string]any{"passed": boolean, "evidence": str, "failures": strs})
	case agent.Judge:
		score := obj([]string{"criterion", "score"}, map[string]any{"criterion": str, "score": map[string]any{"type": "number"}, "rationale": str})
		s = obj([]string{"passed", "evidence"}, map[string]any{"passed": boolean, "evidence": str, "scores": map[string]any{"type": "array", "items": score}})
	case agent.Planner:
		dec := obj([]string{"parent", "children"}, map[string]any{"parent": str, "reason": str, "children": map[string]any{"type": "array", "items": planned}})
		s = obj([]string{}, map[string]any{"atoms": map[string]any{"type": "array", "items": planned}, "decompositions": map[string]any{"type": "array", "items": dec}})
	default:
		return nil
	}
	b, _ := json.Marshal(s)
	return b
}

// ExtractJSON finds the answer in what a model wrote: the whole text when
// it is one JSON object, else the last JSON object in it (inside a fenced
// block or not). ok is false when there is none.
func ExtractJSON(text string) ([]byte, bool) {
	t := strings.TrimSpace(text)
	if json.Valid([]byte(t)) && strings.HasPrefix(t, "{") {
		return []byte(t), true
	}
	// Scan backwards for a '{' that starts a valid object reaching a '}';
	// the answer is at the end, so only the text's tail is searched, and
	// only so many candidates.
	if len(t) > maxScan {
		t = t[len(t)-maxScan:]
	}
	ends := 0
	for end := strings.LastIndexByte(t, '}'); end >= 0 && ends < 64; end = strings.LastIndexByte(t[:end], '}') {
		ends++
		starts := 0
		for start := strings.LastIndexByte(t[:end], '{'); start >= 0 && starts < 256; start = strings.LastIndexByte(t[:start], '{') {
			starts++
			cand := t[start : end+1]
			if json.Valid([]byte(cand)) {
				return []byte(cand), true
			}
		}
	}
	return nil, false
}

// maxScan bounds the tail of a text searched for an answer.
const maxScan = 1 << 20
