package agent

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFitCutsLongTextsWholeCharactersAndSaysSo: a long summary keeps its
// start, never half a character, and ends with the marker; one that fits
// is untouched.
func TestFitCutsLongTextsWholeCharactersAndSaysSo(t *testing.T) {
	r := Result{Summary: strings.Repeat("é", MaxSummary), Findings: "short", Evidence: strings.Repeat("x", MaxSummary)}
	notes := Fit(&r)
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "the answer's summary was 32768 bytes: cut to ") {
		t.Fatalf("notes = %q", notes)
	}
	if len(r.Summary) > MaxSummary || !utf8.ValidString(r.Summary) || !strings.HasSuffix(r.Summary, "the attempt's log has it whole]") {
		t.Fatalf("summary: %d bytes, valid %t, ends %q", len(r.Summary), utf8.ValidString(r.Summary), r.Summary[len(r.Summary)-60:])
	}
	if r.Findings != "short" || len(r.Evidence) != MaxSummary {
		t.Fatalf("fields that fit were changed: %q, %d bytes", r.Findings, len(r.Evidence))
	}
	if CheckBounds(Result{Summary: strings.Repeat("x", 8<<20)}) != nil {
		t.Fatal("CheckBounds refuses a long summary; Fit is what handles it")
	}
}
