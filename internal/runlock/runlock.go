// Package runlock says whether a loop engine is alive for a state file: the
// engine holds an exclusive lock on .claude/aot-loop/run.lock for as long as
// it runs, and writes its pid into it. The lock dies with the process, so a
// loop marked running whose lock nobody holds is a crashed loop.
package runlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gofrs/flock"

	"github.com/aot-loop/aot/internal/journal"
)

// PathFor returns the run lock path for a state file.
func PathFor(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), journal.Dir, "run.lock")
}

// ErrRunning is returned by Acquire when another engine holds the lock.
var ErrRunning = errors.New("the loop is already running")

// Lock is a held run lock.
type Lock struct {
	fl   *flock.Flock
	path string
}

// Acquire takes the run lock for stateFile, or returns an error wrapping
// ErrRunning that names the holder's pid.
func Acquire(stateFile string) (*Lock, error) {
	path := PathFor(stateFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	fl := flock.New(path)
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
	if err := os.WriteFile(path+".pid", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
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
// its pid when known.
func Holder(stateFile string) (pid int, held bool, err error) {
	path := PathFor(stateFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	fl := flock.New(path)
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

func readPID(lockPath string) int {
	data, err := os.ReadFile(lockPath + ".pid")
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}
