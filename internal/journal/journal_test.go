package journal

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAppendSyncRead(t *testing.T) {
	path := PathFor(filepath.Join(t.TempDir(), ".claude", "aot-loop-state.md"))
	j, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	want := []Event{
		{Time: at, Type: RunStart},
		{Time: at, Type: AtomFinish, Atom: "A1", OK: Bool(true), DurationMS: 12, Tokens: 300, CostUSD: 0.01},
	}
	for _, e := range want {
		if err := j.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTornTailIsCutOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	whole := `{"time":"2026-11-22T10:00:00Z","type":"run_start"}` + "\n"
	if err := os.WriteFile(path, []byte(whole+`{"time":"2026-11-2`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || len(got) != 1 {
		t.Fatalf("Read = %v, %v; want the one complete event", got, err)
	}
	j, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Event{Type: Stop, Reason: "manual"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	got, err = Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Type != Stop || got[1].Reason != "manual" {
		t.Fatalf("events after reopen = %+v; want run_start then stop", got)
	}
}

func TestMalformedLineIsSkippedAndNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	data := `{"type":"run_start"}` + "\n" + "not json\n" + "\n" + `{"type":"atom_start"` + "\n" + `{"type":"stop"}` + "\n" + `{"type":"che`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	events, skipped, err := Scan(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Type != RunStart || events[1].Type != Stop {
		t.Fatalf("events = %+v; want run_start and stop", events)
	}
	// Lines 2 and 4 are not events; the torn last line is not reported.
	if len(skipped) != 2 || skipped[0].Line != 2 || skipped[1].Line != 4 || skipped[0].Path != path {
		t.Fatalf("skipped = %+v; want lines 2 and 4", skipped)
	}
	if s := skipped[0].String(); !strings.HasPrefix(s, path+":2: skipped a line") {
		t.Errorf("skipped line reads %q", s)
	}
	if got, err := Read(path); err != nil || len(got) != 2 {
		t.Fatalf("Read = %+v, %v; want the two events", got, err)
	}
	// A resume reads past it too.
	if got, err := ReadSinceCheckpoint(path); err != nil || len(got) != 2 {
		t.Fatalf("ReadSinceCheckpoint = %+v, %v; want the two events", got, err)
	}
	if _, _, err := Scan(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Scan of a missing journal = %v", err)
	}
}

func TestFollowerReadsCompleteLinesAsTheyCome(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	f := NewFollower(path)
	if ev, sk, err := f.Next(); err != nil || len(ev)+len(sk) != 0 {
		t.Fatalf("before the journal exists: %v %v %v", ev, sk, err)
	}
	appendTo := func(s string) {
		t.Helper()
		w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString(s); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	appendTo(`{"type":"run_start"}` + "\n" + `{"type":"atom_st`)
	ev, _, err := f.Next()
	if err != nil || len(ev) != 1 || ev[0].Type != RunStart {
		t.Fatalf("first Next = %+v, %v", ev, err)
	}
	appendTo(`art","atom":"A1"}` + "\n" + "garbage\n")
	ev, sk, err := f.Next()
	if err != nil || len(ev) != 1 || ev[0].Atom != "A1" || len(sk) != 1 || sk[0].Line != 3 {
		t.Fatalf("second Next = %+v, %+v, %v; want A1's start and line 3 skipped", ev, sk, err)
	}
	if ev, sk, err := f.Next(); err != nil || len(ev)+len(sk) != 0 {
		t.Fatalf("nothing new: %v %v %v", ev, sk, err)
	}
	// A new, shorter journal is read from its start.
	if err := os.WriteFile(path, []byte(`{"type":"stop"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ev, _, err := f.Next(); err != nil || len(ev) != 1 || ev[0].Type != Stop || !f.Replaced() {
		t.Fatalf("after the journal shrank: %+v, %v", ev, err)
	}
	if f.Replaced() {
		t.Fatal("Replaced said twice for one replacement")
	}
	// A longer journal renamed over it (a new loop's): from its start too.
	other := filepath.Join(t.TempDir(), "other")
	long := `{"type":"run_start","reason":"new"}` + "\n" + `{"type":"atom_start","atom":"N1"}` + "\n" + `{"type":"atom_start","atom":"N2"}` + "\n"
	if err := os.WriteFile(other, []byte(long), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if ev, _, err := f.Next(); err != nil || len(ev) != 3 || ev[0].Reason != "new" || !f.Replaced() {
		t.Fatalf("after a longer journal replaced it: %+v, %v", ev, err)
	}
	// Rewritten in place, longer, with another first event: from its start.
	if err := os.WriteFile(path, []byte(strings.Replace(long, "new", "NEW", 1)+`{"type":"stop"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ev, _, err := f.Next(); err != nil || len(ev) != 4 || ev[0].Reason != "NEW" || !f.Replaced() {
		t.Fatalf("after the first event changed: %+v, %v", ev, err)
	}
	appendTo(`{"type":"checkpoint"}` + "\n")
	if ev, _, err := f.Next(); err != nil || len(ev) != 1 || f.Replaced() {
		t.Fatalf("an append is not a replacement: %+v, %v", ev, err)
	}
	// The same journal written back by its engine (another file, the same
	// lines and one more): read on, not again.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, append(data, `{"type":"journal_lost"}`+"\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if ev, _, err := f.Next(); err != nil || len(ev) != 1 || ev[0].Type != JournalLost || f.Replaced() {
		t.Fatalf("after a write-back: %+v, %v", ev, err)
	}
}

func TestReadSinceCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	j, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5000; i++ { // more than one 64 KB chunk before the checkpoint
		if err := j.Append(Event{Type: AtomStart, Atom: "OLD"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []Event{{Type: Checkpoint}, {Type: AtomFinish, Atom: "A1"}, {Type: AtomFinish, Atom: "A2"}} {
		if err := j.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSinceCheckpoint(path)
	if err != nil || len(got) != 2 || got[0].Atom != "A1" || got[1].Atom != "A2" {
		t.Fatalf("ReadSinceCheckpoint = %+v, %v; want A1, A2", got, err)
	}
	// No checkpoint at all: everything.
	path2 := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path2, []byte(`{"type":"run_start"}`+"\n"+`{"type":"atom_start"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadSinceCheckpoint(path2); err != nil || len(got) != 2 {
		t.Fatalf("without a checkpoint = %+v, %v", got, err)
	}
	// A checkpoint as the last line: nothing to replay.
	path3 := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path3, []byte(`{"type":"atom_start"}`+"\n"+`{"type":"checkpoint"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadSinceCheckpoint(path3); err != nil || len(got) != 0 {
		t.Fatalf("checkpoint last = %+v, %v", got, err)
	}
}

// TestCheckpointIsAnEventNotBytes: lines that only contain the bytes of a
// checkpoint (garbage, an event quoting them, a torn line) are not taken for
// one, wherever they fall in the chunks read backwards.
func TestCheckpointIsAnEventNotBytes(t *testing.T) {
	real := `{"time":"2026-11-22T10:00:00Z","type":"checkpoint","data":{"input_tokens":2000}}`
	long := `{"type":"atom_start","reason":"` + strings.Repeat("x", 200<<10) + `"}` // spans chunks
	lines := []string{
		`{"type":"run_start"}`, long, real, long,
		`{"type":"atom_finish","atom":"A1","reason":"said \"type\":\"checkpoint\""}`,
		`garbage "type":"checkpoint" {"data":{"input_tokens":0}}`,
		`{"type":"checkpoint"} {"type":"checkpoint"}`,
		`{"type":"atom_finish","atom":"A2"}`,
	}
	path := filepath.Join(t.TempDir(), FileName)
	data := strings.Join(lines, "\n") + "\n" + `{"type":"checkpoint","data":{"input_tokens":0}` // torn
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, after, err := ReadFromCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if cp == nil || DataOf[CheckpointData](*cp).InputTokens == nil || *DataOf[CheckpointData](*cp).InputTokens != 2000 {
		t.Fatalf("checkpoint = %+v; want the real one (2000 tokens)", cp)
	}
	var atoms []string
	for _, ev := range after {
		atoms = append(atoms, ev.Type+":"+ev.Atom)
	}
	if d := cmp.Diff([]string{"atom_start:", "atom_finish:A1", "atom_finish:A2"}, atoms); d != "" {
		t.Fatalf("events after the checkpoint (-want +got):\n%s", d)
	}
	if _, _, err := ReadFromCheckpoint(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing journal: err = %v; want it reported", err)
	}
}

// TestAnEventJSONCannotHoldIsStillJournaled: a +Inf cost or a NaN in the
// data does not drop the event (an atom_finish lost would lose its result).
func TestAnEventJSONCannotHoldIsStillJournaled(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	j, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	inf := Event{Type: AtomFinish, Atom: "A", OK: Bool(true), CostUSD: math.Inf(1), Data: map[string]any{"summary": "done", "score": math.NaN()}}
	if err := j.Append(inf); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || len(got) != 1 {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	if e := got[0]; e.Type != AtomFinish || e.Atom != "A" || e.OK == nil || !*e.OK || e.CostUSD != 0 || !strings.Contains(fmt.Sprint(e.Data["unencodable"]), "unsupported value") {
		t.Fatalf("event = %+v", e)
	}
}
