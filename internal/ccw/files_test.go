package ccw

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/journal"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWriteLayout(t *testing.T) {
	dir := t.TempDir()
	m, s, evs := fixture()
	l := Build(m, s, evs, false)
	if err := Write(dir, l, evs); err != nil {
		t.Fatal(err)
	}
	var back Loop
	if err := json.Unmarshal([]byte(readFile(t, DocPath(dir, m.ID))), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, back); diff != "" {
		t.Errorf("document (-built +read):\n%s", diff)
	}
	tasks := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, m.ID+".tasks.jsonl"))), "\n")
	if len(tasks) != len(s.Atoms) || !strings.HasPrefix(tasks[0], `{"id":"A1",`) {
		t.Errorf("tasks.jsonl: %d lines, first %s", len(tasks), tasks[0])
	}
	prog := ProgressDir(dir, m.ID)
	for _, name := range []string{"develop.md", "debug.md", "validate.md", "summary.md", "changes.log", "debug.log"} {
		fi, err := os.Stat(filepath.Join(prog, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != journal.FileMode {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), journal.FileMode)
		}
	}
	changes := readFile(t, filepath.Join(prog, "changes.log"))
	wantChanges := `{"seq":4,"timestamp":"2026-01-22T10:00:20Z","type":"atom_finish","task":"A1","attempt":1,"iteration":1,"summary":"user model with bcrypt hashes","files":["user.go","user_test.go"]}
{"seq":13,"timestamp":"2026-01-22T10:01:00Z","type":"atom_finish","task":"A2b","attempt":1,"iteration":2,"summary":"JWT sessions","files":["session.go"]}
{"seq":14,"timestamp":"2026-01-22T10:01:01Z","type":"merge","task":"A2b","attempt":1,"iteration":2,"files":["session.go"],"commit":"abc1234"}
{"seq":20,"timestamp":"2026-01-22T10:01:20Z","type":"atom_finish","task":"A3.1","attempt":1,"iteration":3,"summary":"POST /login","files":["login.go"]}
`
	if diff := cmp.Diff(wantChanges, changes); diff != "" {
		t.Errorf("changes.log (-want +got):\n%s", diff)
	}
	debugLines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(prog, "debug.log"))), "\n")
	var types []string
	for _, line := range debugLines {
		var h logLine
		if err := json.Unmarshal([]byte(line), &h); err != nil {
			t.Fatal(err)
		}
		types = append(types, h.Type)
	}
	if diff := cmp.Diff([]string{"atom_finish", "atom_finish", "or_switch", "atom_finish", "atom_parked", "verify"}, types); diff != "" {
		t.Errorf("debug.log types (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{
		"develop.md":  "| A2b | completed | 2 | session.go | JWT sessions |",
		"debug.md":    "- A2a (1): rejected: crash: exit status 2 (Sessions in cookies)",
		"validate.md": "- example.com/auth.TestLogout: auth_test.go:42: session still open",
		"summary.md":  "title: \"Implement user authentication\"\n",
	} {
		if got := readFile(t, filepath.Join(prog, name)); !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", name, want, got)
		}
	}
	if err := Write(dir, Loop{LoopID: "../escape"}, nil); err == nil {
		t.Error("Write took a loop id that is a path")
	}
}

// TestLogsFollowTheJournal writes the view as the journal grows: the logs
// end as if written at once, and only the new lines are appended.
func TestLogsFollowTheJournal(t *testing.T) {
	m, s, evs := fixture()
	once, grown := t.TempDir(), t.TempDir()
	if err := Write(once, Build(m, s, evs, false), evs); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 5, 5, 12, 13, 20, len(evs)} {
		if err := Write(grown, Build(m, s, evs[:n], false), evs[:n]); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"changes.log", "debug.log"} {
		want := readFile(t, filepath.Join(ProgressDir(once, m.ID), name))
		got := readFile(t, filepath.Join(ProgressDir(grown, m.ID), name))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s written as the journal grew differs (-once +grown):\n%s", name, diff)
		}
	}

	// A torn last line (a crash mid-append) is cut off and written again.
	path := filepath.Join(ProgressDir(grown, m.ID), "debug.log")
	whole := readFile(t, path)
	lines := strings.SplitAfter(whole, "\n")
	torn := strings.Join(lines[:len(lines)-2], "") + lines[len(lines)-2][:10]
	if err := os.WriteFile(path, []byte(torn), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(grown, Build(m, s, evs, false), evs); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != whole {
		t.Errorf("debug.log after a torn line:\n%s\nwant:\n%s", got, whole)
	}

	// A new journal (the last line names an event it does not have) is
	// written afresh.
	fresh := []journal.Event{{Time: at(500), Type: journal.RunStart}, {Time: at(501), Type: journal.AtomReset, Atom: "A9"}}
	if err := Write(grown, Build(m, s, fresh, false), fresh); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != `{"seq":2,"timestamp":"2026-01-22T10:08:21Z","type":"atom_reset","task":"A9"}`+"\n" {
		t.Errorf("debug.log of a new journal: %s", got)
	}
	if got := readFile(t, filepath.Join(ProgressDir(grown, m.ID), "changes.log")); got != "" {
		t.Errorf("changes.log of a new journal: %s", got)
	}
}

// TestWriteCrash fails the rename of every file: each keeps its previous
// content, and no temp file is left behind.
func TestWriteCrash(t *testing.T) {
	dir := t.TempDir()
	m, s, evs := fixture()
	before := Build(m, s, evs[:12], false)
	if err := Write(dir, before, evs[:12]); err != nil {
		t.Fatal(err)
	}
	snapshot := func() map[string]string {
		out := map[string]string{}
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			out[path] = readFile(t, path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	was := snapshot()
	crash := errors.New("power cut")
	f := files{rename: func(from, to string) error { return crash }}
	err := f.write(dir, Build(m, s, evs, true), evs)
	if !errors.Is(err, crash) {
		t.Fatalf("write: %v, want the rename's error", err)
	}
	if diff := cmp.Diff(was, snapshot()); diff != "" {
		t.Errorf("files changed by a write whose renames failed (-before +after):\n%s", diff)
	}
	// Only the document fails to be replaced: everything before it is new,
	// the document is the old one, whole.
	n := 0
	f = files{rename: func(from, to string) error {
		if strings.HasSuffix(to, ".json") {
			return crash
		}
		n++
		return os.Rename(from, to)
	}}
	if err := f.write(dir, Build(m, s, evs, true), evs); !errors.Is(err, crash) {
		t.Fatalf("write: %v", err)
	}
	if got := readFile(t, DocPath(dir, m.ID)); got != was[DocPath(dir, m.ID)] {
		t.Error("the document is not the previous one")
	}
	if n == 0 {
		t.Error("no other file was replaced")
	}
	for path := range snapshot() {
		if strings.Contains(filepath.Base(path), ".tmp-") {
			t.Errorf("temp file left: %s", path)
		}
	}
}

func TestRecover(t *testing.T) {
	m, s, evs := fixture()
	bare := Meta{ID: m.ID, Workspace: m.Workspace, StateFile: m.StateFile} // what a restarted server knows
	damage := map[string]func(path string) error{
		"missing":   os.Remove,
		"truncated": func(p string) error { return os.Truncate(p, 100) },
		"not JSON":  func(p string) error { return os.WriteFile(p, []byte("\x00\x00garbage"), 0o600) },
		"empty":     func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"another loop's": func(p string) error {
			return os.WriteFile(p, []byte(`{"loop_id":"loop-v2-20250101-zzzzzz"}`), 0o600)
		},
	}
	for _, paused := range []bool{false, true} {
		for name, harm := range damage {
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				want := Build(m, s, evs, paused)
				if err := Write(dir, want, evs); err != nil {
					t.Fatal(err)
				}
				got, rebuilt, err := Recover(dir, m.ID, bare, s, evs)
				if err != nil || rebuilt {
					t.Fatalf("intact document: rebuilt %t, %v", rebuilt, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("intact document (-want +got):\n%s", diff)
				}
				if err := harm(DocPath(dir, m.ID)); err != nil {
					t.Fatal(err)
				}
				got, rebuilt, err = Recover(dir, m.ID, bare, s, evs)
				if err != nil || !rebuilt {
					t.Fatalf("damaged document: rebuilt %t, %v", rebuilt, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("rebuilt document (-want +got):\n%s", diff)
				}
				// Written again, it is the same file.
				before := readFile(t, filepath.Join(ProgressDir(dir, m.ID), "summary.md"))
				if err := Write(dir, got, evs); err != nil {
					t.Fatal(err)
				}
				wantDoc, _ := json.MarshalIndent(want, "", "  ")
				if got := readFile(t, DocPath(dir, m.ID)); got != string(wantDoc)+"\n" {
					t.Error("the rewritten document differs")
				}
				if readFile(t, filepath.Join(ProgressDir(dir, m.ID), "summary.md")) != before {
					t.Error("summary.md changed")
				}
			})
		}
	}

	t.Run("the state gone too", func(t *testing.T) {
		dir := t.TempDir()
		s2 := *s
		s2.Control.Status = "stopped"
		s2.Control.StopReason = strp("stall: 5 sweeps")
		if err := Write(dir, Build(m, &s2, evs, false), evs); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(DocPath(dir, m.ID))
		got, rebuilt, err := Recover(dir, m.ID, bare, nil, evs)
		if err != nil || !rebuilt || got.Status != StatusFailed || got.Title != m.Title || !got.CreatedAt.Equal(m.CreatedAt) {
			t.Errorf("rebuilt without a state: %s %q %v, rebuilt %t, %v", got.Status, got.Title, got.CreatedAt, rebuilt, err)
		}
	})
	t.Run("nothing to rebuild from", func(t *testing.T) {
		_, _, err := Recover(t.TempDir(), m.ID, bare, nil, nil)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("no progress files: from the state and journal", func(t *testing.T) {
		got, rebuilt, err := Recover(t.TempDir(), m.ID, bare, s, evs)
		if err != nil || !rebuilt || got.Status != StatusRunning || got.Title != "" {
			t.Errorf("got %s %q, rebuilt %t, %v", got.Status, got.Title, rebuilt, err)
		}
	})
	t.Run("bad id", func(t *testing.T) {
		if _, _, err := Recover(t.TempDir(), "../x", bare, s, evs); err == nil {
			t.Error("Recover took a path as an id")
		}
	})
}

func TestFrontMatterRoundTrip(t *testing.T) {
	l := Loop{LoopID: "loop-v2-20260122-abc123", Title: "a: \"quoted\"\n---\ntitle", Description: "line one\n---\nline: two", Status: StatusPaused, CreatedAt: t0}
	fm, ok := parseFrontMatter(renderSummary(l))
	if !ok {
		t.Fatal("front matter not read back")
	}
	want := frontMatter{LoopID: l.LoopID, Title: l.Title, Description: l.Description, Status: l.Status, CreatedAt: t0}
	if diff := cmp.Diff(want, fm); diff != "" {
		t.Errorf("front matter (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "---\n", "---\ntitle: \"x\n---\n", "# no front matter\n"} {
		if _, ok := parseFrontMatter([]byte(bad)); ok {
			t.Errorf("%q read as front matter", bad)
		}
	}
}

func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, ".claude", "aot-loop-state.md")
	checks := filepath.Join(dir, ".claude", "aot-loop", "checks")
	if err := os.MkdirAll(checks, 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(stateFile, nil, 0o600)
	_ = os.WriteFile(filepath.Join(checks, "unit_tests.out"), []byte("--- PASS: TestA (0.00s)\n"), 0o600)
	_ = os.WriteFile(filepath.Join(checks, "removed.out"), []byte("stale"), 0o600)
	evs := []journal.Event{{Time: at(1), Type: journal.Verify, OK: journal.Bool(true), Data: map[string]any{"checklist": []any{
		map[string]any{"item": "unit/tests", "type": "command", "passed": true},
		map[string]any{"item": "lint", "type": "command", "passed": true},
		map[string]any{"item": "readme", "type": "file", "passed": true},
	}}}}
	got := CheckOutputs(stateFile, evs)
	if diff := cmp.Diff(map[string]string{"unit/tests": "--- PASS: TestA (0.00s)\n"}, got); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if got := CheckOutputs(stateFile, evs[:0]); got != nil {
		t.Errorf("outputs before any verification: %v", got)
	}
}

func TestWriteSkipsUnchangedFiles(t *testing.T) {
	dir := t.TempDir()
	m, s, evs := fixture()
	l := Build(m, s, evs, false)
	if err := Write(dir, l, evs); err != nil {
		t.Fatal(err)
	}
	renames := 0
	f := files{rename: func(from, to string) error { renames++; return os.Rename(from, to) }}
	if err := f.write(dir, l, evs); err != nil {
		t.Fatal(err)
	}
	if renames != 0 {
		t.Errorf("%d files rewritten with nothing new", renames)
	}
	if !bytes.Contains([]byte(readFile(t, DocPath(dir, m.ID))), []byte(`"journal_events": 25`)) {
		t.Error("journal_events not in the document")
	}
}
