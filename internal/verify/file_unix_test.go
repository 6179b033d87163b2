//go:build unix

package verify

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A file check on a FIFO answers at once and fails both ways: a FIFO is not
// a file, and it is not nothing either.
func TestFileOnAFIFOFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	for _, missing := range []bool{false, true} {
		done := make(chan FileResult, 1)
		go func() { done <- File(dir, "pipe", missing) }()
		select {
		case res := <-done:
			want := "Path is a named pipe (FIFO), not a regular file: pipe"
			if res.Passed || !res.Exists || res.Evidence != want {
				t.Errorf("File(FIFO, expectMissing=%v) = %+v; want failed, exists, %q", missing, res, want)
			}
		case <-time.After(time.Second):
			t.Fatalf("File(FIFO, expectMissing=%v) did not return within a second", missing)
		}
	}
}
