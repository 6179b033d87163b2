package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// newTopState writes a state file with atoms A1..An and returns its path.
func newTopState(t *testing.T, goal string, n int) string {
	t.Helper()
	obj := state.Objective{
		Goal: goal, BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "done",
		BaseCase: &state.BaseCase{HasChecklist: true, Checklist: []state.ChecklistItem{
			{Item: "the tests pass with a name long enough to need cutting on a narrow screen", Check: &state.Check{Type: state.CheckCommand, Value: "go test ./..."}},
			{Item: "docs", Check: &state.Check{Type: state.CheckFile, Value: "README.md"}},
		}},
	}
	var atoms []state.Atom
	for i := 1; i <= n; i++ {
		a := state.Atom{ID: fmt.Sprintf("A%d", i), Description: "x", DependsOn: []string{}}
		if i == 1 {
			a.Attempts, a.LastFailure = 1, "the agent printed something very long "+strings.Repeat("and more ", 30)
		} else {
			a.DependsOn = []string{"A1"}
		}
		atoms = append(atoms, a)
	}
	stateFile := filepath.Join(t.TempDir(), ".claude", "aot-loop-state.md")
	if err := state.NewStore(stateFile).Create(state.New(obj, atoms, "p"), false); err != nil {
		t.Fatal(err)
	}
	return stateFile
}

func appendEvent(t *testing.T, stateFile string, ev journal.Event) {
	t.Helper()
	jr, err := journal.Open(journal.PathFor(stateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer jr.Close()
	if err := jr.Append(ev); err != nil {
		t.Fatal(err)
	}
	if err := jr.Sync(); err != nil {
		t.Fatal(err)
	}
}

// A journal's first append creates its file, then writes the line; a look
// between the two sees an empty file, which must not count as a change of
// its own (the watch would print a block with nothing new in it).
func TestAnEmptyJournalLooksLikeNoJournal(t *testing.T) {
	stateFile := newTopState(t, "g", 1)
	before := stampLoop(stateFile)
	path := journal.PathFor(stateFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if now := stampLoop(stateFile); now != before {
		t.Fatalf("creating an empty journal changed the stamp: %+v -> %+v", before, now)
	}
	appendEvent(t, stateFile, journal.Event{Type: journal.RunStart})
	if now := stampLoop(stateFile); now == before {
		t.Fatal("an appended event left the stamp as it was")
	}
}

// Without a terminal, --watch prints aot status's block, then a new one
// each time the journal or the state file changes, until it is stopped.
func TestWatchPrintsAStatusBlockOnEveryChange(t *testing.T) {
	stateFile := newTopState(t, "watch in a pipe", 2)
	var out, errOut lockedBuffer
	opts := &statusOptions{IO: &streams{Out: &out, ErrOut: &errOut}, Global: &globalOptions{StateFile: stateFile},
		Events: 8, Watch: true, Interval: 10 * time.Millisecond, now: time.Now}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- statusRun(ctx, opts) }()
	waitFor := func(want string, count int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(out.String(), want) < count {
			if time.Now().After(deadline) {
				t.Fatalf("output lacks %d× %q after 10s:\n%s\nstderr:\n%s", count, want, out.String(), errOut.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("watch in a pipe\n", 1)
	time.Sleep(50 * time.Millisecond) // a few looks at unchanged files print nothing
	if n := strings.Count(out.String(), "watch in a pipe\n"); n != 1 {
		t.Fatalf("%d blocks before any change:\n%s", n, out.String())
	}
	appendEvent(t, stateFile, journal.Event{Type: journal.RunStart})
	waitFor("run_start", 1)
	waitFor("watch in a pipe\n", 2)
	appendEvent(t, stateFile, journal.Event{Type: journal.AtomStart, Atom: "A1", Role: "worker", Attempt: 1})
	waitFor("atom_start  A1  worker  attempt 1", 1)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end with its context")
	}
	got := out.String()
	if n := strings.Count(got, "\n--- "); n != 2 {
		t.Errorf("want 2 separators (3 blocks), got %d:\n%s", n, got)
	}
	if strings.Contains(got, "\x1b") {
		t.Errorf("escapes in plain output:\n%q", got)
	}
}

// The live view fills the terminal it is given, whatever its size, with no
// line wider than it; keys scroll it and q ends it.
func TestTopViewFitsTheTerminal(t *testing.T) {
	stateFile := newTopState(t, strings.Repeat("a goal that goes on and on ", 10), 30)
	appendEvent(t, stateFile, journal.Event{Type: journal.RunStart})
	appendEvent(t, stateFile, journal.Event{Type: journal.AtomFinish, Atom: "A1", Role: "worker", Attempt: 1, OK: journal.Bool(false),
		Reason: "the agent printed something very long " + strings.Repeat("and more ", 30), Data: map[string]any{"kind": "malformed"}})
	appendEvent(t, stateFile, journal.Event{Type: journal.Verify, OK: journal.Bool(false), Data: map[string]any{"checklist": []map[string]any{
		{"item": "docs", "passed": true, "evidence": "File exists: README.md"},
	}}})
	var errOut bytes.Buffer
	opts := &statusOptions{IO: &streams{Out: &bytes.Buffer{}, ErrOut: &errOut}, Global: &globalOptions{StateFile: stateFile},
		Events: 50, Watch: true, Interval: time.Second, now: time.Now}
	m := &topModel{opts: opts, width: 80, height: 24}
	if err := m.reread(); err != nil {
		t.Fatal(err)
	}
	screen := func() []string {
		return strings.Split(m.View().Content, "\n")
	}
	for _, size := range []struct{ w, h int }{{80, 24}, {40, 12}, {20, 6}, {132, 50}} {
		t.Run(fmt.Sprintf("%dx%d", size.w, size.h), func(t *testing.T) {
			m.Update(tea.WindowSizeMsg{Width: size.w, Height: size.h})
			for _, key := range []string{"", "j", "tab", "tab", "G", "k", "g"} {
				if key != "" {
					m.Update(tea.KeyPressMsg{Code: []rune(key)[0], Text: key})
				}
				lines := screen()
				if len(lines) != size.h {
					t.Errorf("after %q: %d lines, want %d:\n%s", key, len(lines), size.h, strings.Join(lines, "\n"))
				}
				for i, l := range lines {
					if w := ansi.StringWidth(l); w > size.w {
						t.Errorf("after %q: line %d is %d wide: %q", key, i+1, w, ansi.Strip(l))
					}
				}
			}
		})
	}
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 80})
	all := ansi.Strip(m.View().Content)
	for _, want := range []string{"failed 1× [malformed]", "✓ docs  File exists: README.md", "· the tests pass", "waiting  A2 on A1", "atom_finish"} {
		if !strings.Contains(all, want) {
			t.Errorf("the view lacks %q:\n%s", want, all)
		}
	}
	if _, cmd := m.Update(tea.KeyPressMsg{Code: 'q', Text: "q"}); cmd == nil || cmd() != tea.Quit() {
		t.Errorf("q does not quit")
	}
}

func TestStatusWatchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"status", "--interval", "1s"},
		{"status", "--watch", "--json"},
		{"top", "--json"},
		{"top", "--interval", "0s"},
		{"top", "extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := Main(args, strings.NewReader(""), &out, &errOut); code != 2 {
				t.Errorf("exit %d, want 2 (usage)\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
			}
		})
	}
	var out bytes.Buffer
	if code := Main([]string{"help", "top"}, strings.NewReader(""), &out, &out); code != 0 || !strings.Contains(out.String(), "aot status --watch") {
		t.Errorf("aot help top: exit %d\n%s", code, out.String())
	}
}
