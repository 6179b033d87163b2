package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// With --json, stdout holds exactly one JSON value on every path: success,
// operation errors and usage errors, of every command, whatever state file
// it meets. Each case runs in-process like the real binary.
func TestJSONIsOneDocumentOnEveryPath(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	valid := strings.Replace(jsonTestState, "ITERATION", "0", 1)
	fixtures := map[string]string{
		"invalid.md": strings.Replace(jsonTestState, "ITERATION", "HOME[$(touch x)]", 1),
		"yaml.md":    "---\nobjective: [\n---\n",
		"empty.md":   "",
		"valid.md":   valid,
	}
	// Every case starts from the same files (aot init --force replaces one).
	reset := func() {
		for name, data := range fixtures {
			write(name, data)
		}
		_ = os.Remove(filepath.Join(dir, "missing.md"))
		// 65 MiB on paper, a hole on disk: over the size limit.
		if f, err := os.Create(filepath.Join(dir, "big.md")); err == nil {
			_ = f.Truncate(65 << 20)
			f.Close()
		}
	}
	reset()
	files := map[string]string{
		"missing":   filepath.Join(dir, "missing.md"),
		"directory": dir,
		"invalid":   filepath.Join(dir, "invalid.md"),
		"yaml":      filepath.Join(dir, "yaml.md"),
		"empty":     filepath.Join(dir, "empty.md"),
		"valid":     filepath.Join(dir, "valid.md"),
	}
	files["too large"] = filepath.Join(dir, "big.md")
	var cases [][]string
	for name, path := range files {
		for _, c := range stateCommands {
			if name == "valid" && c[0] == "run" {
				continue // a real run; aot run's own paths are in run.txtar
			}
			cases = append(cases, append(slices.Clone(c), "--json", "--state-file", path))
		}
	}
	for _, c := range stateCommands {
		// A usage error: an unknown flag, then a missing argument.
		cases = append(cases, append(slices.Clone(c), "--json", "--no-such-flag"))
	}
	cases = append(cases,
		[]string{"--json"},
		[]string{"--json", "no-such-command"},
		[]string{"--json", "atom"},
		[]string{"--json", "atom", "set"},
		[]string{"--json", "atom", "set", "A1"},
		[]string{"--json", "atom", "set", "A1", "done"},
		[]string{"--json", "atom", "add", "a b", "--description", "x"},
		[]string{"--json", "init", "--goal", "g"},
		[]string{"--json", "run", "--state-file", files["valid"]},
		[]string{"--json", "run", "--agent", "claude", "--agent-command", "x"},
		[]string{"--json", "version"},
		[]string{"--json", "help"},
		[]string{"--json", "help", "run"},
		[]string{"run", "--help", "--json"},
		[]string{"atom", "set", "-h", "--json"},
		[]string{"--json", "verify", "command", "true"},
		[]string{"--json", "verify", "command", "exit 3"},
		[]string{"--json", "verify", "file", filepath.Join(dir, "nope")},
		[]string{"--json", "demo", filepath.Dir(files["valid"]), "--pace", "1ms"},
		[]string{"--json", "status", "--events", "-1"},
	)
	// The demo refuses a directory with a state file: give it one.
	write(".claude/aot-loop-state.md", valid)

	for _, args := range cases {
		reset()
		var out, errOut bytes.Buffer
		d := &deps{
			io:     &streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
			getenv: func(string) string { return "" },
			now:    time.Now,
			self:   "aot",
			argv0:  "aot",
			getwd:  func() (string, error) { return dir, nil },
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		code := run(ctx, d, args)
		cancel()
		if took := time.Since(start); took > time.Second {
			t.Logf("aot %s took %s", strings.Join(args, " "), took)
		}
		dec := json.NewDecoder(&out)
		var v any
		err := dec.Decode(&v)
		var extra any
		switch {
		case err != nil:
			t.Errorf("aot %s (exit %d): stdout is not JSON: %v\nstdout: %q\nstderr: %s", strings.Join(args, " "), code, err, out.String(), errOut.String())
		case dec.Decode(&extra) != io.EOF:
			t.Errorf("aot %s (exit %d): stdout holds more than one JSON value", strings.Join(args, " "), code)
		case code != 0:
			// An error document says what went wrong as a sentence.
			if !hasErrorText(v) {
				t.Errorf("aot %s (exit %d): no error sentence in %v", strings.Join(args, " "), code, v)
			}
		}
	}
}

// hasErrorText reports whether a failure document carries its reason: the
// error of the generic shape, errors of validate, missing of gate, the
// failing checks of verify, the message of run's outcome.
func hasErrorText(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if s, ok := m["error"].(string); ok && s != "" {
		return m["success"] == false || m["exists"] != nil
	}
	for _, k := range []string{"errors", "missing", "checklist"} {
		if l, ok := m[k].([]any); ok && len(l) > 0 {
			return true
		}
	}
	if _, ok := m["passed"]; ok {
		return true // a check that did not pass, with its evidence
	}
	return false
}

const jsonTestState = `---
objective:
  goal: "g"
  base_case:
    type: command
    value: "true"
  background_intent: "b"
  deliverables: "d"
  definition_of_done: "c"
control:
  status: pending
  iteration: ITERATION
  stall_count: 0
  prev_pending_count: -1
  stop_requested: false
  stop_reason: null
  redirect_requested: false
atoms:
  - id: A1
    description: "x"
    status: pending
    depends_on: []
  - id: B1
    description: "choice 1"
    status: pending
    depends_on: []
    or_group: g
  - id: B2
    description: "choice 2"
    status: pending
    depends_on: []
    or_group: g
decompositions: []
or_groups:
  g:
    choices: [B1, B2]
    selected: B1
    failed: []
bindings: {}
trail: []
corrections: []
---
`
