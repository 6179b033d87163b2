package fakellm

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseScriptTurnForms(t *testing.T) {
	s, err := ParseScript([]byte(`{"conversations": [{"match": "x", "turns": [
	  [{"type": "text", "text": "plain"}],
	  {"blocks": [{"type": "text", "text": "slow"}], "delay_ms": 5, "usage": {"input_tokens": 1, "output_tokens": 2}},
	  {"type": "error", "status": 529, "times": 2, "retry_after": "1"},
	  [{"type": "error", "kind": "usage_limit"}]
	]}], "default": [{"type": "text", "text": "dflt"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Turn{
		{Blocks: []Block{{Type: "text", Text: "plain"}}},
		{Blocks: []Block{{Type: "text", Text: "slow"}}, DelayMS: 5, Usage: &Usage{InputTokens: 1, OutputTokens: 2}},
		{Error: &ErrorReply{Status: 529, RetryAfter: "1"}, Times: 2},
		{Error: &ErrorReply{Kind: "usage_limit"}},
	}
	if diff := cmp.Diff(want, s.Conversations[0].Turns); diff != "" {
		t.Errorf("turns (-want +got):\n%s", diff)
	}

	// What MarshalJSON writes parses back the same.
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseScript(data)
	if err != nil {
		t.Fatalf("reparse %s: %v", data, err)
	}
	if diff := cmp.Diff(s, again); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestParseScriptErrors(t *testing.T) {
	for name, script := range map[string]string{
		"unknown field":       `{"conversations": [{"match": "x", "turn": []}]}`,
		"unknown block type":  `{"conversations": [{"turns": [[{"type": "image"}]]}]}`,
		"tool_use no name":    `{"conversations": [{"turns": [[{"type": "tool_use", "input": {}}]]}]}`,
		"input not an object": `{"conversations": [{"turns": [[{"type": "tool_use", "name": "Bash", "input": "ls"}]]}]}`,
		"final without json":  `{"conversations": [{"turns": [[{"type": "final"}]]}]}`,
		"error among blocks":  `{"conversations": [{"turns": [[{"type": "text"}, {"type": "error"}]]}]}`,
		"unknown error field": `{"conversations": [{"turns": [{"type": "error", "statu": 429}]}]}`,
		"not json":            `{`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseScript([]byte(script)); err == nil {
				t.Errorf("ParseScript(%s) = nil error", script)
			}
		})
	}
}

func TestLoadScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(toolThenText), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadScript(path)
	if err != nil || len(s.Conversations[0].Turns) != 2 {
		t.Fatalf("LoadScript = %+v, %v", s, err)
	}
	if _, err := LoadScript(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
