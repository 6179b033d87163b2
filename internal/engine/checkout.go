package engine

import (
	"io"
	"os"
	"path/filepath"

	"github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/journal"
)

// The base case's command checks keep only the tail of their output as
// evidence; their whole output of the last verification goes to files, so
// that readers (the CCW view's test results and coverage) can parse it.

// maxCheckOutput bounds one check's kept output.
const maxCheckOutput = 8 << 20

// CheckOutputDir holds the last verification's output of each command check.
func CheckOutputDir(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "checks")
}

// CheckOutputFile is where the output of the check named item is kept.
func CheckOutputFile(stateFile, item string) string {
	return filepath.Join(CheckOutputDir(stateFile), history.SafeName(item)+".out")
}

func (l *localHost) checkOutput(item string) io.WriteCloser {
	e := l.e
	if err := os.MkdirAll(CheckOutputDir(e.opts.StateFile), journal.DirMode); err != nil {
		return nil
	}
	f, err := os.OpenFile(CheckOutputFile(e.opts.StateFile, item), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, journal.FileMode)
	if err != nil {
		return nil
	}
	return &cappedFile{f: f, left: maxCheckOutput}
}

// cappedFile writes up to its limit and drops the rest, never failing the
// check it records.
type cappedFile struct {
	f    *os.File
	left int64
}

func (c *cappedFile) Write(p []byte) (int, error) {
	if c.left > 0 {
		n := min(int64(len(p)), c.left)
		w, _ := c.f.Write(p[:n])
		c.left -= int64(w)
	}
	return len(p), nil
}

func (c *cappedFile) Close() error { return c.f.Close() }
