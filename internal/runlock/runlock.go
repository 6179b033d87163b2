// Package runlock says whether a loop engine is alive for a state file: the
// engine holds an exclusive lock on .claude/aot-loop/run.lock for as long as
// it runs, and writes its pid into it. The lock dies with the process, so a
// loop marked running whose lock nobody holds is a crashed loop.
//
// The lock lives in the aot-loop folder of the real state file (symbolic
// links resolved): two links to one state file share one lock, so two
// engines can never run on it at once.
package runlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/gofrs/flock"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// PathFor returns the run lock path for a state file.
func PathFor(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "run.lock")
}

// ErrRunning is returned by Acquire when another engine holds the lock.
var ErrRunning = errors.New("the loop is already running")

// Lock is a held run lock.
type Lock struct {
	fl   *flock.Flock
	path string
}

// Acquire takes the run lock for stateFile, or returns an error wrapping
// ErrRunning that names the holder's pid. The state file must be a regular
// file (state.CheckPath): the aot-loop folder is only ever created beside
// one, never beside a missing file, a directory, a FIFO or a device.
func Acquire(stateFile string) (*Lock, error) {
	if err := state.CheckPath(stateFile); err != nil {
		return nil, err
	}
	path := PathFor(stateFile)
	if err := os.MkdirAll(filepath.Dir(path), journal.DirMode); err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	fl := newFlock(path)
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("run lock %s: %w", path, err)
	}
	if !ok {
		if pid := readPID(path); pid > 0 {
			return nil, fmt.Errorf("%w (engine pid %d holds %s)", ErrRunning, pid, path)
		}
		return nil, fmt.Errorf("%w (%s is held)", ErrRunning, path)
	}
	if err := writePID(path + ".pid"); err != nil {
		_ = fl.Unlock()
		return nil, fmt.Errorf("run lock: %w", err)
	}
	return &Lock{fl: fl, path: path}, nil
}

// Release drops the lock.
func (l *Lock) Release() error {
	_ = os.Remove(l.path + ".pid")
	return l.fl.Unlock()
}

// Holder reports whether a live engine holds the run lock of stateFile, and
// its pid when known. It creates nothing.
func Holder(stateFile string) (pid int, held bool, err error) {
	path := PathFor(stateFile)
	if fi, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	} else if err == nil && !fi.Mode().IsRegular() {
		return 0, false, fmt.Errorf("run lock %s is %s, not a regular file", path, state.FileKind(fi.Mode()))
	}
	fl := newFlock(path)
	ok, err := fl.TryRLock()
	if err != nil {
		return 0, false, fmt.Errorf("run lock %s: %w", path, err)
	}
	if ok {
		_ = fl.Unlock()
		return 0, false, nil
	}
	return readPID(path), true, nil
}

// newFlock opens lock files as gofrs/flock does, with mode 0600, and
// without blocking should one be a FIFO.
func newFlock(path string) *flock.Flock {
	flag := os.O_CREATE | os.O_RDONLY
	switch runtime.GOOS {
	case "aix", "solaris", "illumos":
		flag = os.O_CREATE | os.O_RDWR
	}
	return flock.New(path, flock.SetFlag(flag|oNonblock), flock.SetPermissions(journal.FileMode))
}

func writePID(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|oNonblock, journal.FileMode)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strconv.Itoa(os.Getpid()) + "\n"); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func readPID(lockPath string) int {
	f, err := os.OpenFile(lockPath+".pid", os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, 32)
	n, _ := f.Read(buf)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	return pid
}
