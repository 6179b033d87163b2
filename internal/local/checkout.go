package local

import (
	"io"
	"os"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
)

// The base case's command checks keep only the tail of their output as
// evidence; their whole output of the last verification goes to files, so
// that readers (the CCW view's test results and coverage) can parse it.

// maxCheckOutput bounds one check's kept output.
const maxCheckOutput = 8 << 20

func (l *localHost) checkOutput(item string) io.WriteCloser {
	if err := os.MkdirAll(engine.CheckOutputDir(l.opts.StateFile), journal.DirMode); err != nil {
		return nil
	}
	f, err := os.OpenFile(engine.CheckOutputFile(l.opts.StateFile, item), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, journal.FileMode)
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
