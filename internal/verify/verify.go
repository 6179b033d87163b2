// Package verify checks an objective's base case from outside the agents that
// worked on it: shell commands, files and globs, AND/OR groups of them, and
// the judged checks (assertion, quality) handed to a Judge.
//
// It is built to fail closed. An empty checklist, group or command is an
// error rather than a vacuous pass; a negative check (not_command, not_file)
// passes only when the thing it looks at could really be observed; and a
// report passes only when every check that had to pass did and nothing was
// left undecided.
package verify

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds a command check that sets no timeout of its own.
const DefaultTimeout = 60 * time.Second

// ParseTimeout reads a timeout written as whole seconds ("90") or as a Go
// duration ("90s", "2m"). It must be greater than zero.
func ParseTimeout(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("timeout is empty: give seconds (90) or a duration (90s, 2m)")
	}
	var d time.Duration
	if allDigits(t) {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n > math.MaxInt64/int64(time.Second) {
			return 0, fmt.Errorf("timeout %q is too large", s)
		}
		d = time.Duration(n) * time.Second
	} else {
		var err error
		if d, err = time.ParseDuration(t); err != nil {
			return 0, fmt.Errorf("invalid timeout %q: give seconds (90) or a duration (90s, 2m)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("timeout %q must be greater than zero", s)
	}
	return d, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
