package verify

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTailBufferKeepsTheEnd(t *testing.T) {
	for _, chunk := range []int{1, 7, 999, 2000, 4096} {
		t.Run("", func(t *testing.T) {
			// "é" is two bytes; the leading "x" puts rune boundaries on odd offsets.
			text := "x" + strings.Repeat("é", 3000) + "END"
			tb := &tailBuffer{max: 2000}
			for i := 0; i < len(text); i += chunk {
				_, _ = tb.Write([]byte(text[i:min(i+chunk, len(text))]))
			}
			got := tb.String()
			if !utf8.ValidString(got) || !strings.HasSuffix(got, "END") || len(got) > 2000 || len(got) < 1990 {
				t.Fatalf("chunk %d: tail of %d bytes, valid %v, suffix %q", chunk, len(got), utf8.ValidString(got), got[max(0, len(got)-5):])
			}
			if strings.Contains(got, "\uFFFD") {
				t.Fatalf("chunk %d: a cut rune was replaced instead of dropped", chunk)
			}
		})
	}
}

func TestTailBufferShortOutputIsKeptWhole(t *testing.T) {
	tb := &tailBuffer{max: 2000}
	_, _ = tb.Write([]byte("héllo\xff"))
	if got, want := tb.String(), "héllo\uFFFD"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
