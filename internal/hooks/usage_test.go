package hooks

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aot-loop/aot/internal/journal"
)

func TestSessionUsageJournalsWhatTheTranscriptGainedOnce(t *testing.T) {
	dir := t.TempDir()
	sf := filepath.Join(dir, ".claude", "aot-loop-state.md")
	tr := filepath.Join(dir, "transcript.jsonl")
	// Two content blocks of one answer repeat its usage; a user line has none.
	write := func(lines string) {
		t.Helper()
		f, err := os.OpenFile(tr, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(lines); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	write(`{"type":"user","message":{"content":"go"}}
{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":100,"cache_read_input_tokens":900,"output_tokens":20}}}
{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":100,"cache_read_input_tokens":900,"output_tokens":20}}}
{"type":"assistant","message":{"id":"m2","usage":{"input_tokens":5,"output_tokens":7}}}
{"type":"assistant","message":{"id":"m3","usage":{"input_tokens":1`) // still being written
	in := Input{SessionID: "S1", TranscriptPath: tr}
	tokens := func() []int64 {
		t.Helper()
		evs, err := journal.Read(journal.PathFor(sf))
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, ev := range evs {
			if ev.Type == journal.SessionUsage {
				out = append(out, ev.Tokens)
			}
		}
		return out
	}
	if err := journalSessionUsage(sf, in); err != nil {
		t.Fatal(err)
	}
	if got := tokens(); len(got) != 1 || got[0] != 1032 {
		t.Fatalf("after the first stop: %v, want [1032]", got)
	}
	// Nothing new: nothing journaled. The answer being written is counted
	// once it is whole.
	if err := journalSessionUsage(sf, in); err != nil {
		t.Fatal(err)
	}
	write(`0,"output_tokens":2}}}` + "\n")
	if err := journalSessionUsage(sf, in); err != nil {
		t.Fatal(err)
	}
	if got := tokens(); len(got) != 2 || got[1] != 12 {
		t.Fatalf("after the answer ended: %v, want [1032 12]", got)
	}
	// Another session's transcript starts its own count.
	other := filepath.Join(dir, "other.jsonl")
	if err := os.WriteFile(other, []byte(`{"type":"assistant","message":{"id":"x","usage":{"input_tokens":3,"output_tokens":4}}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := journalSessionUsage(sf, Input{SessionID: "S2", TranscriptPath: other}); err != nil {
		t.Fatal(err)
	}
	if got := tokens(); len(got) != 3 || got[2] != 7 {
		t.Fatalf("another session: %v, want [1032 12 7]", got)
	}
	// No transcript named: nothing happens; one that cannot be read is an
	// error the hook ignores.
	if err := journalSessionUsage(sf, Input{SessionID: "S3"}); err != nil {
		t.Fatal(err)
	}
	if err := journalSessionUsage(sf, Input{SessionID: "S3", TranscriptPath: filepath.Join(dir, "gone.jsonl")}); err == nil {
		t.Fatal("a missing transcript is not said")
	}
}
