//go:build unix

package state

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// within fails the test if fn has not returned within a second: opening a
// FIFO without O_NONBLOCK would wait for a writer forever.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatalf("%s did not return within a second", what)
	}
}

func mkfifo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.md")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	return path
}

func isFIFO(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

func TestStoreRefusesAFIFOAtOnce(t *testing.T) {
	path := mkfifo(t)
	st := NewStore(path)
	var errs []error
	within(t, "Read", func() { _, err := st.Read(); errs = append(errs, err) })
	within(t, "Update", func() { _, err := st.Update(func(*State) error { return nil }); errs = append(errs, err) })
	within(t, "Create", func() { errs = append(errs, st.Create(mustParse(t, miniState), false)) })
	within(t, "Create(overwrite)", func() { errs = append(errs, st.Create(mustParse(t, miniState), true)) })
	want := "state file " + path + " is a named pipe (FIFO), not a regular file"
	for i, err := range errs {
		if err == nil || err.Error() != want {
			t.Errorf("operation %d = %v; want %q", i, err, want)
		}
	}
	if !isFIFO(path) {
		t.Error("the FIFO was replaced")
	}
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a lock file was made beside the FIFO: %v", err)
	}
}

// A path that becomes a FIFO after CheckPath looked at it: the open itself
// does not block, and what was opened is refused.
func TestOpenRegularDoesNotBlockOnAFIFO(t *testing.T) {
	path := mkfifo(t)
	var err error
	within(t, "readRegular", func() { _, err = readRegular(path) })
	var pe *PathError
	if !errors.As(err, &pe) || pe.Kind != "a named pipe (FIFO)" {
		t.Fatalf("readRegular(FIFO) = %v; want a *PathError", err)
	}
}

func TestOpenRegularNamesASocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.md")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skip(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Skip(err)
	}
	var rerr error
	within(t, "readRegular", func() { _, rerr = readRegular(path) })
	var pe *PathError
	if !errors.As(rerr, &pe) || pe.Kind != "a socket" {
		t.Fatalf("readRegular(socket) = %v; want a *PathError", rerr)
	}
}
