// Package brief shortens what agents and tools said to fit a line: a
// progress line, a reason in the journal, a cell of a table.
package brief

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Line is s on one line (runs of white space made one space) and at most
// max runes long. A longer text is cut at the end of a word when one ends in
// the last quarter of the room, else at a rune, and marked with "…"; the
// whole text is for the logs.
func Line(s string, max int) string {
	return Cut(strings.Join(strings.Fields(s), " "), max)
}

// Cut is s, trimmed, at most max runes long, cut as Line cuts; it keeps
// s's line breaks.
func Cut(s string, max int) string {
	s = strings.TrimSpace(s)
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	if max == 1 {
		return "…"
	}
	r := []rune(s)
	keep := r[:max-1] // room for the mark
	if !isSpace(r[max-1]) {
		// The cut falls inside a word: go back to the word's start, unless
		// that loses more than a quarter of the room.
		for i := len(keep) - 1; i >= len(keep)-len(keep)/4-1 && i > 0; i-- {
			if isSpace(keep[i]) {
				keep = keep[:i]
				break
			}
		}
	}
	return strings.TrimRight(string(keep), " \t\n\r.,;:") + "…"
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// Count is n and its noun: "1 atom", "3 atoms".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
