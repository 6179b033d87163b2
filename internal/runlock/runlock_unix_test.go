//go:build unix

package runlock

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

func TestAcquireRefusesAFIFOAtOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "state.md")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Acquire(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, state.ErrNotRegular) {
			t.Fatalf("Acquire(FIFO) = %v; want state.ErrNotRegular", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Acquire(FIFO) did not return within a second")
	}
	if _, err := os.Stat(filepath.Join(dir, journal.Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an aot-loop folder was made beside the FIFO: %v", err)
	}
}
