package agent

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aot-loop/aot/internal/brief"
)

// ErrNoJSON is an answer with no JSON object in it.
var ErrNoJSON = errors.New("no JSON object in the answer")

// MalformedReason is how an answer aot cannot read is said, whichever
// backend ran the agent: the cause (ErrNoJSON or Decode's error), then the
// start of what the agent said, cut at a word (aot logs has all of it).
func MalformedReason(role Role, cause error, said string) string {
	return fmt.Sprintf("malformed answer: %v; the %s said: %s", cause, role, QuoteSaid(said))
}

// QuoteSaid quotes the start of what an agent said on one line: "nothing",
// or at most maxQuoted runes, cut at a word, with how much there was.
func QuoteSaid(said string) string {
	s := strings.Join(strings.Fields(said), " ")
	if s == "" {
		return "nothing"
	}
	short := brief.Line(s, maxQuoted)
	q := strconv.Quote(short)
	if short != s {
		q += fmt.Sprintf(" (%d bytes in all)", len(strings.TrimSpace(said)))
	}
	return q
}
