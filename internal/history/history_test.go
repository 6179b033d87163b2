package history

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/journal"
)

func TestSpendCountsEveryFinishedAttemptAndKeepsUnknownApart(t *testing.T) {
	evs := []journal.Event{
		{Type: journal.AtomStart, Atom: "A", Role: "worker", Attempt: 1},
		{Type: journal.AtomFinish, Atom: "A", Role: "worker", Attempt: 1, Tokens: 100, CostUSD: 0.5, DurationMS: 10},
		{Type: journal.AtomFinish, Atom: "A", Role: "worker", Attempt: 2, DurationMS: 5, Data: map[string]any{"usage_unknown": true}},
		{Type: journal.AtomFinish, Atom: "B", Role: "probe", Attempt: 1, Tokens: 7, CostUSD: 0.01, DurationMS: 1},
		{Type: journal.Verify, Tokens: 3}, // a judge's spend outside any attempt still counts in the total
	}
	got := SpendOf(evs)
	want := Spending{
		Total: Spend{Attempts: 3, Unknown: 1, Tokens: 110, CostUSD: 0.51, DurationMS: 16},
		Atoms: map[string]Spend{
			"A": {Attempts: 2, Unknown: 1, Tokens: 100, CostUSD: 0.5, DurationMS: 15},
			"B": {Attempts: 1, Tokens: 7, CostUSD: 0.01, DurationMS: 1},
		},
		Roles: map[string]Spend{
			"worker": {Attempts: 2, Unknown: 1, Tokens: 100, CostUSD: 0.5, DurationMS: 15},
			"probe":  {Attempts: 1, Tokens: 7, CostUSD: 0.01, DurationMS: 1},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("spend (-want +got):\n%s", d)
	}
}

func TestTheBookFollowsEachAttempt(t *testing.T) {
	sf := filepath.Join(t.TempDir(), ".claude", "aot-loop-state.md")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ok := true
	b := NewBook(sf)
	for _, ev := range []journal.Event{
		{Time: now, Type: journal.AtomStart, Atom: "A", Role: "worker", Attempt: 1},
		{Time: now, Type: journal.AtomStart, Atom: "B", Role: "worker", Attempt: 1},
		{Time: now, Type: journal.AtomFinish, Atom: "A", Role: "worker", Attempt: 1, OK: &ok, DurationMS: 40},
		{Time: now, Type: journal.AtomReset, Atom: "B", Role: "worker", Attempt: 1, Reason: "paused: aot pause"},
		{Time: now, Type: journal.AtomStart, Atom: "C", Role: "worker", Attempt: 1},
		{Time: now, Type: journal.Stop},
	} {
		b.Add(ev)
	}
	var got []string
	for _, a := range b.Attempts() {
		got = append(got, a.Atom+":"+a.Outcome)
		if want := filepath.Join(LogDir(sf), LogName(a.Atom, a.Role, a.Attempt)); a.LogFile != want {
			t.Errorf("%s log file %s, want %s", a.Atom, a.LogFile, want)
		}
	}
	if d := cmp.Diff([]string{"A:ok", "B:reset", "C:unfinished"}, got); d != "" {
		t.Errorf("outcomes (-want +got):\n%s", d)
	}
	// A log file the journal does not name is listed as unknown.
	os.MkdirAll(LogDir(sf), 0o755)
	os.WriteFile(filepath.Join(LogDir(sf), LogName("a/b", "probe", 2)), []byte("x"), 0o644)
	b.AddOrphanLogs()
	last := b.Attempts()[len(b.Attempts())-1]
	if last.Atom != "a_b" || last.Role != "probe" || last.Attempt != 2 || last.Outcome != "unknown" {
		t.Errorf("orphan log: %+v", last)
	}
}
