package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runningText is a state file of the layout aot writes, its loop running.
func runningText() string {
	s := New(Objective{Goal: "Ship it", BaseCase: &BaseCase{Legacy: &Check{Type: CheckFile, Value: "done.txt"}}},
		[]Atom{{ID: "A1", Description: "Write the code"}}, "Ship it.")
	s.Control.Status = ControlRunning
	return string(Marshal(s))
}

// TestPeekStatus moved here from internal/hooks with PeekStatus (the hooks'
// early look at control.status); its cases are the hooks' ones.
func TestPeekStatus(t *testing.T) {
	peekText := runningText()
	tests := []struct {
		text   string
		status string
		ok     bool
	}{
		{peekText, "running", true},
		{strings.Replace(peekText, "status: running", `status: "stopped"  # by hand`, 1), "stopped", true},
		{strings.ReplaceAll(peekText, "\n", "\r\n"), "running", true},
		{"---\ncontrol: {status: running}\n---\n", "", false},
		{"hello world\n", "", false},
		{"---\nobjective: {}\n---\ncontrol:\n  status: running\n", "", false},
		// more layouts the scalar reader tells, or leaves to the store
		{strings.Replace(peekText, "status: running", `status: 'paused_x' # why`, 1), "paused_x", true},
		{strings.Replace(peekText, "status: running", `status: Running`, 1), "", false},
		{strings.Replace(peekText, "status: running", `status: "run"ning`, 1), "", false},
		{strings.Replace(peekText, "  status: running\n", "", 1), "", false},
		{"\uFEFF" + peekText, "running", true},
	}
	for i, tc := range tests {
		path := filepath.Join(t.TempDir(), "state.md")
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, ok, err := PeekStatus(path)
		if err != nil || got != tc.status || ok != tc.ok {
			t.Errorf("%d: PeekStatus = %q, %v, %v; want %q, %v", i, got, ok, err, tc.status, tc.ok)
		}
		if ok {
			// What the peek tells agrees with the whole reader.
			s, err := Parse([]byte(tc.text))
			if err != nil || s.Control.Status != got {
				t.Errorf("%d: Parse reads status %q (%v), the peek %q", i, s.Control.Status, err, got)
			}
		}
	}
	if _, _, err := PeekStatus(filepath.Join(t.TempDir(), "missing.md")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v, want a not-exist error", err)
	}
}
