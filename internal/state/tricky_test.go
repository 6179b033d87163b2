package state

// Hardening tests for reading and writing the state file: legal but unusual
// spellings of one state (testdata/tricky), and the parser and writer defects
// of the seed plugin (Dn in spec/seed-plugin-behaviour.md §8) that must not
// come back.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// trickyFiles all hold the contract data of testdata/tricky/base.md.
var trickyFiles = []struct {
	name string
	fast bool // the fast scanner reads it; otherwise the YAML library does
}{
	{"base.md", true},
	{"flow-block.md", true},   // block lists where base has flow ones and back (D8)
	{"comments.md", true},     // comments on every line and between list items (D7)
	{"key-order.md", true},    // sections and keys in reverse order, id last (D10)
	{"indent4.md", true},      // 4-space indentation, items indented under their key (D9)
	{"scalars.md", true},      // plain, single, double, |, >, |-, >- and escapes (D9, D25)
	{"unknown-keys.md", true}, // other tools' keys at every level
	{"crlf.md", true},         // CRLF line endings (D20)
	{"bom.md", true},          // UTF-8 byte order mark
	{"bom-crlf.md", true},
	{"library-only.md", false}, // flow mappings, multi-line scalars, anchors, "? key"
}

func trickyBase(t *testing.T) *State {
	t.Helper()
	s, err := Parse(readFixture(t, "tricky/base.md"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// compareReaders decodes the frontmatter of data with the fast scanner and
// with the YAML library. fast is false when the scanner declines the file;
// an error means the scanner accepted something the library reads otherwise.
func compareReaders(data []byte) (fast bool, err error) {
	s, err := Parse(data)
	if err != nil {
		return false, err
	}
	fm := s.doc.fm
	ft, froot, err := scanTree(fm, 2)
	if err != nil {
		return false, nil
	}
	lt, lroot, err := libraryTree(fm, 2)
	if err != nil {
		return true, fmt.Errorf("the scanner accepts a frontmatter the YAML library refuses: %v", err)
	}
	fd, ld := &decoder{t: ft}, &decoder{t: lt}
	fs, ls := fd.decode(froot), ld.decode(lroot)
	if !Equal(fs, ls) {
		return true, fmt.Errorf("readers disagree (-library +scanner):\n%s", diffStates(ls, fs))
	}
	if diff := cmp.Diff(issueKeys(ld.errors), issueKeys(fd.errors)); diff != "" {
		return true, fmt.Errorf("readers report different errors (-library +scanner):\n%s", diff)
	}
	return true, nil
}

func issueKeys(issues []Issue) []string {
	var out []string
	for _, is := range issues {
		out = append(out, is.Field+": "+is.Message)
	}
	return out
}

func TestTrickyFilesReadLikeTheirCanonicalForm(t *testing.T) {
	base := trickyBase(t)
	for _, tc := range trickyFiles {
		t.Run(tc.name, func(t *testing.T) {
			data := readFixture(t, filepath.Join("tricky", tc.name))
			s, err := Parse(data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !Equal(base, s) {
				t.Errorf("differs from base.md (-base +%s):\n%s", tc.name, diffStates(base, s))
			}
			if r := Validate(s); !r.Valid() {
				t.Errorf("Validate: %v", r.Errors)
			}
			fast, err := compareReaders(data)
			if err != nil {
				t.Fatal(err)
			}
			if fast != tc.fast {
				t.Errorf("fast scanner took it: %v, want %v", fast, tc.fast)
			}
			if got := Marshal(s); string(got) != string(data) {
				t.Errorf("Marshal without a change altered the file:\n%s", cmp.Diff(string(data), string(got)))
			}
		})
	}
}

// commentOf returns the comment that ends line, if any: a '#' at the start
// or after a blank, outside quotes.
func commentOf(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimRight(line[i:], "\r")
		}
	}
	return ""
}

// TestTrickyFilesKeepEverythingOnAOneFieldChange covers D13 (the body is never
// edited), D17 (neighbouring comments survive) and D20 (line endings are kept).
func TestTrickyFilesKeepEverythingOnAOneFieldChange(t *testing.T) {
	want := trickyBase(t)
	want.Atom("A2").Status = StatusInProgress
	for _, tc := range trickyFiles {
		t.Run(tc.name, func(t *testing.T) {
			data := readFixture(t, filepath.Join("tricky", tc.name))
			s, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			s.Atom("A2").Status = StatusInProgress
			out := Marshal(s)
			got, err := Parse(out)
			if err != nil {
				t.Fatalf("the written file does not parse: %v\n%s", err, out)
			}
			if !Equal(want, got) {
				t.Errorf("re-read state (-want +got):\n%s", diffStates(want, got))
			}
			if _, err := compareReaders(out); err != nil {
				t.Error(err)
			}
			in, o := string(data), string(out)
			for _, line := range strings.Split(in, "\n") {
				if c := commentOf(line); c != "" && !strings.Contains(o, c) {
					t.Errorf("comment lost: %q", c)
				}
			}
			if n, m := strings.Count(in, "x_"), strings.Count(o, "x_"); n != m {
				t.Errorf("unknown keys: %d before, %d after", n, m)
			}
			if strings.HasPrefix(in, "\uFEFF") != strings.HasPrefix(o, "\uFEFF") {
				t.Error("byte order mark not kept")
			}
			if crlf := strings.Contains(in, "\r\n"); crlf && strings.Count(o, "\n") != strings.Count(o, "\r\n") {
				t.Error("D20: a CRLF file was written with mixed line endings")
			}
			if got.Body != s.Body || !strings.HasSuffix(strings.ReplaceAll(o, "\r\n", "\n"), s.Body) {
				t.Error("D13: the Markdown body changed")
			}
			if tc.fast {
				if d := changedLines(in, o); len(d) != 1 || !strings.Contains(d[0], "in_progress") {
					t.Errorf("want exactly the status line changed, got %q", d)
				}
			}
		})
	}
}

// changedLines returns the lines of b that differ from a, for two texts of
// the same number of lines (else every line of b).
func changedLines(a, b string) []string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(la) != len(lb) {
		return lb
	}
	var out []string
	for i := range la {
		if la[i] != lb[i] {
			out = append(out, lb[i])
		}
	}
	return out
}

// replaceOnce returns src with old replaced by new, failing when old is not
// there exactly once.
func replaceOnce(t *testing.T, src, old, new string) string {
	t.Helper()
	if n := strings.Count(src, old); n != 1 {
		t.Fatalf("%q occurs %d times", old, n)
	}
	return strings.Replace(src, old, new, 1)
}

// miniState is a small valid file whose last section is atoms.
const miniState = `---
objective:
  goal: "build it"
  base_case:
    type: command
    value: "true"
  background_intent: "x"
  deliverables: "x"
  definition_of_done: "x"
  constraints:
    max_iterations: 5
    max_parallel_agents: 1
    max_stall_count: 2
control:
  status: running
  iteration: 1
  stall_count: 0
  prev_pending_count: -1
  stop_requested: false
  stop_reason: null
  redirect_requested: false
atoms:
  - id: A1
    description: "one"
    status: pending
    depends_on: []
---
Note: build it fast
  status: draft
`

func mustParse(t *testing.T, data string) *State {
	t.Helper()
	s, err := Parse([]byte(data))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, data)
	}
	return s
}

func writeState(t *testing.T, data string) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.md")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return NewStore(path)
}

func TestMalformedYAMLIsAParseErrorNamingTheLine(t *testing.T) {
	base := string(readFixture(t, "tricky/base.md"))
	// base.md: line 30 is "  iteration: 3", line 44 "    status: pending" of A2, line 46 "  - id: A3".
	tests := []struct {
		name     string
		old, new string
		line     int
	}{
		{"tab indentation", "  iteration: 3\n", "\titeration: 3\n", 30},
		{"duplicate key", "  iteration: 3\n", "  iteration: 3\n  iteration: 4\n", 31},
		{"key indented by one space", "  iteration: 3\n", "  iteration: 3\n iteration: 4\n", 31},
		{"stray key inside an atom", "    status: pending\n    depends_on: [A1]\n", "    status: pending\n   bad: 1\n    depends_on: [A1]\n", 45},
		{"list item at the wrong depth", "  - id: A3\n", "   - id: A3\n", 46},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := replaceOnce(t, base, tc.old, tc.new)
			_, err := Parse([]byte(src))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("want *ParseError, got %v", err)
			}
			if pe.Line != tc.line {
				t.Errorf("error names line %d, want %d: %v", pe.Line, tc.line, err)
			}
		})
	}
}

func TestBrokenFencesAreParseErrors(t *testing.T) {
	tests := map[string]string{
		"missing frontmatter":       strings.TrimPrefix(miniState, "---\n"),
		"unterminated frontmatter":  strings.Replace(miniState, "\n---\n", "\n", 1),
		"empty frontmatter":         "---\n\n---\nbody\n",
		"empty file":                "",
		"fence not on its own line": "--- objective:\n---\n",
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(src))
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Errorf("want a *ParseError with a line, got %#v", err)
			}
		})
	}
}

func TestUnclosedFlowListIsAParseErrorNearItsLine(t *testing.T) {
	// The YAML library notices the missing ']' at the next token, so the
	// error may name the following line; it must never be silent.
	src := replaceOnce(t, miniState, "    depends_on: []\n", "    depends_on: [A0\n")
	_, err := Parse([]byte(src))
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("want *ParseError, got %v", err)
	}
	if pe.Line < 26 || pe.Line > 27 {
		t.Errorf("error names line %d, want 26 or 27: %v", pe.Line, err)
	}
}

func TestStoreReadNamesFileAndLine(t *testing.T) {
	st := writeState(t, replaceOnce(t, miniState, "  iteration: 1\n", "\titeration: 1\n"))
	_, err := st.Read()
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != st.Path() || pe.Line != 16 {
		t.Fatalf("want a ParseError for %s line 16, got %#v", st.Path(), err)
	}
	if want := st.Path() + ":16: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q does not start with %q", err.Error(), want)
	}
}

// TestD3RefusedUpdateLeavesFileByteIdentical: a failing or refused change
// must not touch the file (the seed scripts could leave it empty).
func TestD3RefusedUpdateLeavesFileByteIdentical(t *testing.T) {
	data := string(readFixture(t, "tricky/comments.md"))
	tests := []struct {
		name string
		fn   func(*State) error
	}{
		{"fn fails", func(s *State) error { s.Control.Iteration = 99; return errors.New("boom") }},
		{"illegal transition", func(s *State) error { s.Atom("A4").Status = StatusResolved; return nil }},
		{"unknown status", func(s *State) error { s.Atom("A2").Status = "pending_review"; return nil }},
		{"unknown dependency", func(s *State) error { s.Atom("A2").DependsOn = []string{"A9"}; return nil }},
		{"cycle", func(s *State) error { s.Atom("A1").DependsOn = []string{"A3"}; return nil }},
		{"binding for unknown atom", func(s *State) error { s.SetBinding(Binding{AtomID: "Z1", Summary: "x"}); return nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := writeState(t, data)
			if _, err := st.Update(tc.fn); err == nil {
				t.Fatal("Update succeeded")
			}
			got, err := os.ReadFile(st.Path())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != data {
				t.Errorf("file changed:\n%s", cmp.Diff(data, string(got)))
			}
			entries, _ := os.ReadDir(filepath.Dir(st.Path()))
			for _, e := range entries {
				if e.Name() != "state.md" && e.Name() != "state.md.lock" {
					t.Errorf("left behind %s", e.Name())
				}
			}
		})
	}
}

// TestD6MissingControlFieldsAreErrors: the seed hook looped forever when
// iteration or stall_count was missing; here they are contract errors, and an
// empty value is written on the next change.
func TestD6MissingControlFieldsAreErrors(t *testing.T) {
	src := replaceOnce(t, miniState, "  iteration: 1\n  stall_count: 0\n", "")
	r := Validate(mustParse(t, src))
	for _, f := range []string{"control.iteration", "control.stall_count"} {
		found := false
		for _, is := range r.Errors {
			found = found || is.Field == f
		}
		if !found {
			t.Errorf("no error for %s in %v", f, r.Errors)
		}
	}

	st := writeState(t, replaceOnce(t, miniState, "  iteration: 1\n", "  iteration:\n"))
	if _, err := st.Update(func(s *State) error { s.Control.Iteration = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(st.Path())
	if !strings.Contains(string(got), "\n  iteration: 2\n") {
		t.Errorf("empty iteration not written:\n%s", got)
	}
}

// TestD9StatusSpellings: quoted statuses read as the status; a status that
// merely starts with a known one is an error, not "pending".
func TestD9StatusSpellings(t *testing.T) {
	for _, v := range []string{`"pending"`, `'pending'`, `pending   # a comment`, `pending`} {
		s := mustParse(t, replaceOnce(t, miniState, "    status: pending\n", "    status: "+v+"\n"))
		if s.Atoms[0].Status != StatusPending {
			t.Errorf("status: %s read as %q", v, s.Atoms[0].Status)
		}
	}
	s := mustParse(t, replaceOnce(t, miniState, "    status: pending\n", "    status: pending_review\n"))
	if r := Validate(s); r.Valid() {
		t.Error("status pending_review accepted")
	}
}

// TestD10AtomWhoseFirstKeyIsNotID stays a separate atom.
func TestD10AtomWhoseFirstKeyIsNotID(t *testing.T) {
	src := replaceOnce(t, miniState, "    depends_on: []\n---", `    depends_on: []
  - description: "two"
    id: A2
    status: pending
    depends_on: [A1]
---`)
	s := mustParse(t, src)
	want := []Atom{
		{ID: "A1", Description: "one", Status: StatusPending, DependsOn: []string{}},
		{ID: "A2", Description: "two", Status: StatusPending, DependsOn: []string{"A1"}},
	}
	if diff := cmp.Diff(want, s.Atoms, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Line" }, cmp.Ignore())); diff != "" {
		t.Errorf("atoms (-want +got):\n%s", diff)
	}
}

// hostileStrings break naive YAML writers (D11) or readers (D25).
var hostileStrings = []string{
	`said "hi" C:\new`, "two\nlines\n", "  leading and trailing  ", "# not a comment", "key: value",
	"- dash", "---", "...", "'single'", `"double"`, "tab\there", "null", "~", "true", "010", "0x1F", "1e3", "",
	"[x, y]", "{a: b}", "*alias", "&anchor", "!tag", "%dir", "@at", "`tick`", "|", ">", "?", "ünïcödé ✓",
	"line\u2028sep", "nul\x00byte", "bell\a", "\u00a0nbsp", "\ufeffbom", "emoji 🎉", "a #b", "a: #b", "C:\\",
}

// TestD11HostileStringsRoundTrip: every string survives a write and a re-read
// unchanged, through the patching writer and the canonical one.
func TestD11HostileStringsRoundTrip(t *testing.T) {
	for i, h := range hostileStrings {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			s := mustParse(t, miniState)
			id := "A2" + h
			s.Atoms[0].Description = h
			s.Atoms = append(s.Atoms, Atom{ID: id, Description: h, Status: StatusPending, DependsOn: []string{"A1", h}})
			s.SetBinding(Binding{AtomID: id, Summary: h, Artifacts: []string{h, "b"}})
			s.Control.StopReason = &h
			s.Trail = append(s.Trail, TrailEntry{ORGroup: h, Selected: h, Reason: h, Timestamp: h})
			fresh := New(s.Objective, append([]Atom(nil), s.Atoms...), h)
			fresh.Bindings, fresh.Trail = s.Bindings, s.Trail
			for name, st := range map[string]*State{"patched": s, "new": fresh} {
				out := Marshal(st)
				got, err := Parse(out)
				if err != nil {
					t.Fatalf("%s: written file does not parse: %v\n%s", name, err, out)
				}
				if !Equal(st, got) {
					t.Errorf("%s: round trip changed the state:\n%s", name, diffStates(st, got))
				}
				if _, err := compareReaders(out); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
}

// TestD13ChangesNeverReachTheBody: the body has "---" and "  status:" lines;
// status changes of the loop and of an atom leave it alone, and a status
// written to an atom that has none goes into that atom.
func TestD13ChangesNeverReachTheBody(t *testing.T) {
	data := string(readFixture(t, "tricky/base.md"))
	data = replaceOnce(t, data, "    description: \"Write JSON\"\n    status: pending\n", "    description: \"Write JSON\"\n")
	st := writeState(t, data)
	before := mustParse(t, data)
	s, err := st.Update(func(s *State) error {
		s.Control.Status = ControlStopped
		s.Atom("A2").Status = StatusInProgress
		s.Atom("A4").Status = StatusPending
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(st.Path())
	got := mustParse(t, string(out))
	if got.Body != before.Body || !strings.HasSuffix(string(out), before.Body) {
		t.Errorf("body changed:\n%s", cmp.Diff(before.Body, got.Body))
	}
	if !Equal(s, got) || got.Atom("A4").Status != StatusPending || got.Control.Status != ControlStopped {
		t.Errorf("unexpected state written:\n%s", out)
	}
	if r := Validate(got); !r.Valid() {
		t.Errorf("written file invalid: %v", r.Errors)
	}
}

// TestD15NewAtomsStayInTheFrontmatter when atoms is the last section.
func TestD15NewAtomsStayInTheFrontmatter(t *testing.T) {
	st := writeState(t, miniState)
	_, err := st.Update(func(s *State) error {
		s.Atoms = append(s.Atoms, Atom{ID: "A2", Description: "two", Status: StatusPending, DependsOn: []string{"A1"}})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(st.Path())
	s := mustParse(t, string(out))
	if len(s.Atoms) != 2 || s.Atoms[1].ID != "A2" {
		t.Errorf("atoms after the change: %+v", s.Atoms)
	}
	if want := "Note: build it fast\n  status: draft\n"; s.Body != want {
		t.Errorf("body %q, want %q", s.Body, want)
	}
}

// TestD16ChangesToMissingSectionsAreWritten: no silent no-op when a section
// or a key is absent from the file.
func TestD16ChangesToMissingSectionsAreWritten(t *testing.T) {
	src := replaceOnce(t, miniState, "  stop_reason: null\n", "")
	st := writeState(t, src)
	reason := "user asked"
	_, err := st.Update(func(s *State) error {
		s.Atoms[0].Status = StatusInProgress
		s.SetBinding(Binding{AtomID: "A1", Summary: "did it", Artifacts: []string{"a.go"}})
		s.Trail = append(s.Trail, TrailEntry{ORGroup: "g", Selected: "A1", Reason: "r", Timestamp: "2026-01-01T00:00:00Z"})
		s.Control.StopReason = &reason
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Read()
	if err != nil {
		t.Fatal(err)
	}
	if b := got.Binding("A1"); b == nil || b.Summary != "did it" || len(got.Trail) != 1 || got.Control.StopReason == nil || *got.Control.StopReason != reason {
		t.Errorf("changes lost: binding %+v trail %+v stop_reason %v", b, got.Trail, got.Control.StopReason)
	}
}

// TestD17ReplacingABindingKeepsItsNeighbours: comments and blank lines around
// the binding survive, and artifacts stays (as []) when the new one has none.
func TestD17ReplacingABindingKeepsItsNeighbours(t *testing.T) {
	data := string(readFixture(t, "tricky/comments.md"))
	s := mustParse(t, data)
	s.SetBinding(Binding{AtomID: "A1", Summary: "replaced"})
	out := string(Marshal(s))
	for _, keep := range []string{"  # results, short\n  A1:\n", "# === Trail ===\ntrail:\n", "    summary: \"replaced\"\n    artifacts: []   # paths\n"} {
		if !strings.Contains(out, keep) {
			t.Errorf("missing %q in:\n%s", keep, out)
		}
	}
	if d := changedLines(data, out); len(d) != 2 {
		t.Errorf("want the summary and artifacts lines changed, got %q", d)
	}
}

// TestD18DuplicatesAndDanglingReferencesAreErrors, and every cycle is named.
func TestD18DuplicatesAndDanglingReferencesAreErrors(t *testing.T) {
	base := string(readFixture(t, "tricky/base.md"))
	tests := []struct {
		name, old, new string
		want           []string // fields that must carry an error
	}{
		{"duplicate id", "  - id: A4\n", "  - id: A3\n", []string{"atoms[3].id"}},
		{"binding for unknown atom", "  A1:\n    summary:", "  A7:\n    summary:", []string{"bindings.A7"}},
		{"self-loop and a second cycle", "    depends_on: [A1]\n", "    depends_on: [A1, A3]\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := replaceOnce(t, base, tc.old, tc.new)
			if tc.name == "self-loop and a second cycle" {
				src = replaceOnce(t, src, "    description: \"Write JSON\"\n    status: pending\n    depends_on: [A1, A2]\n", "    description: \"Write JSON\"\n    status: pending\n    depends_on: [A4]\n")
			}
			r := Validate(mustParse(t, src))
			fields := map[string]bool{}
			var all []string
			for _, is := range r.Errors {
				fields[is.Field] = true
				all = append(all, is.String())
			}
			for _, f := range tc.want {
				if !fields[f] {
					t.Errorf("no error on %s; errors: %q", f, all)
				}
			}
			if tc.name == "self-loop and a second cycle" {
				text := strings.Join(all, "\n")
				if !strings.Contains(text, `"A4" depends on itself`) || !strings.Contains(text, "A2") || !strings.Contains(text, "A3") || len(r.Errors) < 2 {
					t.Errorf("want the self-loop A4 and the cycle A2-A3 reported, got %q", all)
				}
			}
		})
	}
}

// TestD19NumbersHaveOneReading: 010 is never octal 8; spellings the readers
// disagree on are errors, not silent conversions; booleans in any case.
func TestD19NumbersHaveOneReading(t *testing.T) {
	for _, v := range []string{"010", "08", "+5", "1_000", "0x10", "0o10", "1e1"} {
		s := mustParse(t, replaceOnce(t, miniState, "  iteration: 1\n", "  iteration: "+v+"\n"))
		r := Validate(s)
		if r.Valid() {
			t.Errorf("iteration: %s accepted as %d", v, s.Control.Iteration)
		}
	}
	s := mustParse(t, replaceOnce(t, miniState, "    description: \"one\"\n", "    description: 010\n"))
	if s.Atoms[0].Description != "010" {
		t.Errorf("description: 010 read as %q", s.Atoms[0].Description)
	}
	for _, v := range []string{"True", "TRUE", "true"} {
		s := mustParse(t, replaceOnce(t, miniState, "  stop_requested: false\n", "  stop_requested: "+v+"\n"))
		if !s.Control.StopRequested {
			t.Errorf("stop_requested: %s read as false", v)
		}
	}
	s = mustParse(t, replaceOnce(t, miniState, "  stop_requested: false\n", "  stop_requested: yes\n"))
	if Validate(s).Valid() {
		t.Error("stop_requested: yes accepted")
	}
}

// TestD20CRLFFileStaysCRLF after a change that adds lines.
func TestD20CRLFFileStaysCRLF(t *testing.T) {
	crlf := strings.ReplaceAll(miniState, "\n", "\r\n")
	st := writeState(t, crlf)
	_, err := st.Update(func(s *State) error {
		s.Atoms = append(s.Atoms, Atom{ID: "A2", Description: "two\nlines", Status: StatusPending, DependsOn: []string{"A1"}})
		s.SetBinding(Binding{AtomID: "A1", Summary: "s", Artifacts: []string{"x"}})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(st.Path())
	if strings.Count(string(out), "\n") != strings.Count(string(out), "\r\n") {
		t.Errorf("mixed line endings:\n%q", out)
	}
	if s := mustParse(t, string(out)); len(s.Atoms) != 2 || s.Binding("A1") == nil {
		t.Errorf("changes lost:\n%s", out)
	}
}

// TestD39SymlinkedStateFileIsWrittenThrough: the link stays a link, the
// target gets the change, its permissions stay.
func TestD39SymlinkedStateFileIsWrittenThrough(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real", "state.md")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte(miniState), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "state.md")
	if err := os.Symlink(filepath.Join("real", "state.md"), link); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	st := NewStore(link)
	if _, err := st.Update(func(s *State) error { s.Control.Iteration = 7; return nil }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced by a file (mode %v, %v)", fi.Mode(), err)
	}
	tfi, _ := os.Stat(target)
	if tfi.Mode().Perm() != 0o600 {
		t.Errorf("target mode %v, want 0600", tfi.Mode().Perm())
	}
	data, _ := os.ReadFile(target)
	if s := mustParse(t, string(data)); s.Control.Iteration != 7 {
		t.Errorf("target not updated:\n%s", data)
	}
}

// diffStates shows how two states differ in their contract data.
func diffStates(want, got *State) string {
	return cmp.Diff(want, got, cmpopts.IgnoreUnexported(State{}))
}
