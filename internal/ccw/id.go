package ccw

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"time"
)

// Loop ids have CCW's form, loop-v2-YYYYMMDD-xxxxxx: the day the loop was
// created and six lowercase base-36 characters.
const (
	idPrefix = "loop-v2-"
	idSuffix = 6
	idLen    = len(idPrefix) + 8 + 1 + idSuffix
	base36   = "0123456789abcdefghijklmnopqrstuvwxyz"
)

// NewID returns a fresh loop id for a loop created at now (its date in
// now's own location), its suffix drawn from rand. Should rand fail, the
// suffix comes from now's nanoseconds instead, so an id is always given.
func NewID(now time.Time, rand io.Reader) string {
	var b [8]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		binary.BigEndian.PutUint64(b[:], uint64(now.UnixNano()))
	}
	return makeID(now, binary.BigEndian.Uint64(b[:]))
}

// IDFor returns the id of the loop of an existing state file: the same
// for the same absolute path and creation day, so a workspace's loop keeps
// its id across restarts of the server.
func IDFor(stateFileAbsPath string, created time.Time) string {
	sum := sha256.Sum256([]byte(stateFileAbsPath))
	return makeID(created, binary.BigEndian.Uint64(sum[:8]))
}

func makeID(day time.Time, n uint64) string {
	b := make([]byte, 0, idLen)
	b = append(b, idPrefix...)
	b = day.AppendFormat(b, "20060102")
	b = append(b, '-')
	for range idSuffix {
		b = append(b, base36[n%36])
		n /= 36
	}
	return string(b)
}

// ValidID says whether s is a loop id of the form loop-v2-YYYYMMDD-xxxxxx
// (a real date, six lowercase letters or digits). Ids name files, so
// nothing else is accepted.
func ValidID(s string) bool {
	if len(s) != idLen || s[:len(idPrefix)] != idPrefix || s[len(idPrefix)+8] != '-' {
		return false
	}
	day := s[len(idPrefix) : len(idPrefix)+8]
	for i := 0; i < len(day); i++ {
		if day[i] < '0' || day[i] > '9' {
			return false
		}
	}
	if _, err := time.Parse("20060102", day); err != nil {
		return false
	}
	for _, c := range []byte(s[len(idPrefix)+9:]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}
