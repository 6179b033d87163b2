package state

import (
	"crypto/rand"
	"time"
)

// NewLoopID returns a fresh loop id: the day (in now's location) and eight
// random base-36 characters, e.g. "20261125-k3x9q0ab". Two starts of a loop,
// in one repository or in two clones, never share one.
func NewLoopID(now time.Time) string {
	const base36 = "0123456789abcdefghijklmnopqrstuvwxyz"
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		// crypto/rand does not fail on supported platforms; the clock is
		// the fallback all the same.
		n := uint64(now.UnixNano())
		for i := range r {
			r[i], n = byte(n), n>>8
		}
	}
	b := now.AppendFormat(make([]byte, 0, 17), "20060102")
	b = append(b, '-')
	for _, c := range r {
		b = append(b, base36[int(c)%36])
	}
	return string(b)
}
