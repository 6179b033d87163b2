package local

import (
	"errors"
	"fmt"
	"os"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// fileStamp identifies a version of the state file cheaply: the same file
// (inode), size and modification time.
type fileStamp struct {
	fi os.FileInfo
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi: fi}
}

func (a fileStamp) equal(b fileStamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == nil && b.fi == nil
	}
	return os.SameFile(a.fi, b.fi) && a.fi.Size() == b.fi.Size() && a.fi.ModTime().Equal(b.fi.ModTime())
}

// errChangedBehind aborts a write when the state file changed since the
// engine last looked: the change is handled first.
var errChangedBehind = errors.New("the state file changed behind the engine's back")

// flush syncs the journal, then writes the in-memory state to the file under
// the store's lock. A stop requested in the file meanwhile is kept and
// honoured.
func (l *localHost) flush() error {
	c := l.c
	if !stampOf(l.opts.StateFile).equal(l.stamp) {
		if err := l.external(); err != nil {
			return err
		}
	}
	if !c.Dirty() {
		return nil
	}
	if err := l.jr.Sync(); err != nil {
		return err
	}
	written := state.Clone(c.State())
	_, err := l.store.UpdateBatch(func(fs *state.State) error {
		if !stampOf(l.opts.StateFile).equal(l.stamp) {
			return errChangedBehind // changed since the check above
		}
		if fs.Control.StopRequested {
			c.Stop(stopReason(fs))
		}
		stopReq, stopReason := fs.Control.StopRequested, fs.Control.StopReason
		state.CopyInto(fs, state.Clone(written))
		if stopReq && written.Control.Status == state.ControlRunning {
			fs.Control.StopRequested = true
			fs.Control.StopReason = stopReason
		}
		return nil
	})
	if err != nil {
		var pe *state.ParseError
		if errors.Is(err, errChangedBehind) || errors.Is(err, state.ErrNotExist) || errors.As(err, &pe) {
			// Deleted or broken between the check above and the write:
			// handled like any change behind the engine's back.
			l.stamp = fileStamp{}
			return l.external()
		}
		return fmt.Errorf("write state: %w", err)
	}
	l.stamp = l.writtenStamp()
	l.lastWritten = written
	c.MarkClean()
	l.lastFlush = l.Now()
	c.Event(journal.Event{}.With(l.checkpointData()))
	return nil
}

// checkpointData is what a checkpoint carries: the loop's usage so far and
// the process trees of the attempts in flight.
func (l *localHost) checkpointData() journal.CheckpointData {
	u, unknown := l.c.Usage()
	d := journal.CheckpointData{
		InputTokens:  journal.Ref(journal.Count(u.InputTokens)),
		OutputTokens: journal.Count(u.OutputTokens),
		CostUSD:      u.CostUSD,
		UsageUnknown: journal.Count(unknown),
	}
	if trees := l.liveTrees(); len(trees) > 0 {
		d.Processes = trees
	}
	return d
}
