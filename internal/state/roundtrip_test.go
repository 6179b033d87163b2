package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseBoth reads data with the fast scanner and with the YAML library and
// fails the test when they disagree.
func parseBoth(t *testing.T, data []byte) *State {
	t.Helper()
	s, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	lib := parseWithLibrary(t, data)
	if !Equal(s, lib) {
		t.Fatalf("fast and library readers disagree:\n%s", diffStates(lib, s))
	}
	return s
}

func parseWithLibrary(t *testing.T, data []byte) *State {
	t.Helper()
	s, err := parseWith(data, libraryTree)
	if err != nil {
		t.Fatalf("library parse: %v", err)
	}
	return s
}

func TestRoundTripUnchangedIsByteIdentical(t *testing.T) {
	for _, name := range []string{"schema-example.md", "legacy-init.md", "checklist-init.md"} {
		t.Run(name, func(t *testing.T) {
			data := readFixture(t, name)
			s := parseBoth(t, data)
			if !s.doc.t.spans {
				t.Errorf("%s: expected the fast reader to take it", name)
			}
			got := Marshal(s)
			if string(got) != string(data) {
				t.Errorf("round trip changed the file:\n%s", cmp.Diff(string(data), string(got)))
			}
		})
	}
}

func TestStatusChangeTouchesOneLine(t *testing.T) {
	data := readFixture(t, "schema-example.md")
	s := parseBoth(t, data)
	s.Atom("A2").Status = StatusInProgress
	got := string(Marshal(s))
	want := strings.Replace(string(data), "    status: pending\n    depends_on: [A1]\n\n  - id: A3", "    status: in_progress\n    depends_on: [A1]\n\n  - id: A3", 1)
	if got != want {
		t.Errorf("unexpected diff:\n%s", cmp.Diff(want, got))
	}
}

func TestCommentedStatusIsKeptAndValueReplaced(t *testing.T) {
	data := readFixture(t, "schema-example.md")
	s := parseBoth(t, data)
	if s.Control.Status != "running" || s.Atoms[0].Status != "resolved" {
		t.Fatalf("inline comments leaked into values: %q %q", s.Control.Status, s.Atoms[0].Status)
	}
	s.Control.Status = ControlStopped
	got := string(Marshal(s))
	if !strings.Contains(got, "  status: stopped                           # pending | running | stopped | completed\n") {
		t.Errorf("comment lost or value not replaced:\n%s", got)
	}
}
