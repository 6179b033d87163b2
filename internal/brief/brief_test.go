package brief

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLineCutsAtAWord(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"rate limited, retrying after the last status check", 40, "rate limited, retrying after the last…"},
		{"short enough", 40, "short enough"},
		{"  many\n\nlines   here ", 40, "many lines here"},
		{"exactly ten", 11, "exactly ten"},
		// One long word: cut inside it, at a rune.
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 10, "aaaaaaaaa…"},
		// The word's start is too far back: cut in the word.
		{"a bcdefghijklmnopqrstuvwxyz", 12, "a bcdefghij…"},
		{"héllo wörld ünïcode façade", 20, "héllo wörld ünïcode…"},
		{"word, next", 7, "word…"},
	} {
		got := Line(c.in, c.max)
		if got != c.want {
			t.Errorf("Line(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
		if n := utf8.RuneCountInString(got); n > c.max {
			t.Errorf("Line(%q, %d) has %d runes", c.in, c.max, n)
		}
	}
}

func TestCutKeepsLineBreaks(t *testing.T) {
	got := Cut("first line\nsecond line is long", 20)
	if got != "first line\nsecond…" {
		t.Errorf("Cut = %q", got)
	}
	if strings.Contains(Cut("a b", 0), "…") {
		t.Error("max 0 means no bound")
	}
}

func TestCountSaysOneInTheSingular(t *testing.T) {
	for n, want := range map[int]string{0: "0 atoms", 1: "1 atom", 2: "2 atoms", 12: "12 atoms"} {
		if got := Count(n, "atom"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
