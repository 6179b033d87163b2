package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// aot graph reads the state file: it refuses the same paths as every
// command (statepath.txtar runs it on FIFOs, sockets, devices, directories).
func init() {
	stateCommands = append(stateCommands, []string{"graph"}, []string{"graph", "--format", "svg"})
}

// TestGraphExitCodes: a bad format or flag is a usage error (2), a missing,
// unreadable or invalid state file an operation error (1) naming the file.
func TestGraphExitCodes(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.md")
	invalid := filepath.Join(dir, "invalid.md")
	broken := filepath.Join(dir, "broken.md")
	for path, data := range map[string]string{
		valid:   strings.Replace(jsonTestState, "ITERATION", "0", 1),
		invalid: strings.Replace(jsonTestState, "ITERATION", "many", 1),
		broken:  "---\natoms: [\n---\n",
	} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		args   []string
		code   int
		stderr string // a part of it
	}{
		{[]string{"graph", "--state-file", valid}, 0, ""},
		{[]string{"graph", "--state-file", valid, "--format", "png"}, 2, `invalid --format "png"`},
		{[]string{"graph", "--state-file", valid, "--max-nodes", "-1"}, 2, "--max-nodes"},
		{[]string{"graph", "--state-file", valid, "extra"}, 2, "extra"},
		{[]string{"graph", "--state-file", valid, "--json", "--format", "dot"}, 2, "-o FILE"},
		{[]string{"graph", "--state-file", filepath.Join(dir, "missing.md")}, 1, "missing.md"},
		{[]string{"graph", "--state-file", invalid}, 1, "invalid.md does not validate"},
		{[]string{"graph", "--state-file", broken}, 1, "broken.md"},
		{[]string{"graph", "--state-file", valid, "-o", filepath.Join(dir, "no", "such", "dir.svg")}, 1, "dir.svg"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[3:], " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			d := &deps{
				io:     &streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
				getenv: func(string) string { return "" },
				now:    time.Now,
				getwd:  func() (string, error) { return dir, nil },
			}
			if code := run(context.Background(), d, tt.args); code != tt.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.stderr) {
				t.Errorf("stderr %q does not say %q", errOut.String(), tt.stderr)
			}
		})
	}
}
