package local

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// The state file is never lost. The engine holds the whole state in memory,
// and notices a change made behind its back (a person's editor, an agent,
// aot stop) before it writes again:
//   - a valid change is taken as a redirect: it stops only what it
//     invalidates, and the engine's own progress since its last write is
//     kept where the person did not touch the same part;
//   - an invalid or unreadable change is refused: the person's version is
//     kept beside the file (NAME.rejected-TIME), the engine's is written
//     back, and the journal and progress say so;
//   - a deleted or emptied file is written back from memory, unless its
//     project folder was moved or deleted (moved.go).

// goneSettle is how many times (20 ms apart) the engine looks whether a
// missing state file's project folder is going too, before it writes the
// file back.
const goneSettle = 25

// external handles a state file that changed since the engine's last write.
func (l *localHost) external() error {
	if err := l.place.check(); err != nil {
		return err // moved or deleted: written back, it would be recreated at the old path
	}
	l.stamp = stampOf(l.opts.StateFile)
	path := l.opts.StateFile
	fs, err := l.store.Read()
	// A writer that is not atomic (truncate, then write) shows an empty or
	// half-written file for a moment: give it time to finish before judging.
	for settle := 0; err != nil && settle < 5; settle++ {
		time.Sleep(20 * time.Millisecond)
		if st := stampOf(path); !st.equal(l.stamp) {
			l.stamp = st
			fs, err = l.store.Read()
		}
	}
	switch {
	case errors.Is(err, state.ErrNotExist):
		// A project folder being deleted (rm -r) or moved file by file
		// loses the state file before the folder itself: look again for a
		// moment before writing it back there.
		for range goneSettle {
			time.Sleep(20 * time.Millisecond)
			if err := l.place.check(); err != nil {
				return err
			}
		}
		return l.restore("the state file was deleted behind the engine's back; written back from memory", nil)
	case err != nil:
		data, _ := os.ReadFile(path)
		if len(data) == 0 {
			return l.restore("the state file was emptied behind the engine's back; written back from memory", nil)
		}
		return l.restore(fmt.Sprintf("the state file was changed behind the engine's back and cannot be read (%v)", err), data)
	}
	if fs.Control.StopRequested {
		l.c.Stop(stopReason(fs))
	}
	if l.lastWritten == nil || sameContent(l.lastWritten, fs) {
		return nil // only control changed: a stop request, handled above
	}
	if r := state.Validate(fs); !r.Valid() {
		data, _ := os.ReadFile(path)
		return l.restore(fmt.Sprintf("the state file was edited behind the engine's back into an invalid state (%s)", r.Errors[0]), data)
	}
	next := l.merge(fs)
	if r := state.Validate(next); !r.Valid() {
		data, _ := os.ReadFile(path)
		return l.restore(fmt.Sprintf("the hand edit of the state file conflicts with the loop's progress (%s)", r.Errors[0]), data)
	}
	typ := "dag_adjustment"
	if l.c.Replaces(next) {
		typ = "objective_change"
	}
	next.Corrections = append(next.Corrections, state.Correction{Timestamp: l.Now().Format(time.RFC3339), Type: typ,
		Description: "the state file was edited by hand while the loop ran; taken as a redirect"})
	stopped := l.c.Adopt(next, "hand edit of the state file")
	l.c.Event(journal.Event{OK: journal.Bool(true), Reason: "the state file was edited by hand; taken as a redirect"}.With(journal.HandEditData{Stopped: &stopped}))
	l.c.Say("the state file was edited by hand: taken as a redirect (agents stopped: %d)", len(stopped))
	return nil
}

// restore writes the engine's state back, keeping the person's version (if
// any) beside the file.
func (l *localHost) restore(why string, theirs []byte) error {
	c := l.c
	ev := journal.Event{Type: journal.HandEdit, OK: journal.Bool(false), Reason: why}
	if len(theirs) > 0 {
		kept := fmt.Sprintf("%s.rejected-%s", l.opts.StateFile, l.Now().UTC().Format("20060102T150405.000Z"))
		if err := os.WriteFile(kept, theirs, 0o600); err == nil {
			ev = ev.With(journal.HandEditData{Kept: kept})
			why += "; your version is kept in " + kept
		}
	}
	c.Event(ev)
	c.Say("%s", why)
	if err := l.jr.Sync(); err != nil {
		return err
	}
	if err := l.store.Create(state.Clone(c.State()), true); err != nil {
		return fmt.Errorf("write the state back: %w", err)
	}
	l.stamp = l.writtenStamp()
	l.lastWritten = state.Clone(c.State())
	c.MarkClean()
	l.lastFlush = l.Now()
	return nil
}

// sameContent reports whether two states differ only in control fields.
func sameContent(a, b *state.State) bool {
	x, y := state.Clone(a), state.Clone(b)
	x.Control, y.Control = state.Control{}, state.Control{}
	return string(state.Marshal(x)) == string(state.Marshal(y))
}

// merge is the person's version fs with the engine's progress since its
// last write, wherever the person left that part as the engine wrote it.
func (l *localHost) merge(fs *state.State) *state.State {
	ours := l.c.State()
	lw := l.lastWritten
	next := state.Clone(fs)
	next.Control = ours.Control
	next.Control.StopRequested, next.Control.StopReason = fs.Control.StopRequested, fs.Control.StopReason
	for i := range ours.Atoms {
		ours := &ours.Atoms[i]
		was, theirs := lw.Atom(ours.ID), next.Atom(ours.ID)
		switch {
		case theirs == nil && was == nil:
			// Added by the engine since its last write (a planner).
			next.Atoms = append(next.Atoms, *ours)
		case theirs == nil || was == nil:
			// Removed by the person.
		case theirs.Status == was.Status && theirs.Attempts == was.Attempts && theirs.LastFailure == was.LastFailure:
			theirs.Status, theirs.Attempts, theirs.LastFailure = ours.Status, ours.Attempts, ours.LastFailure
		}
	}
	for _, b := range ours.Bindings {
		was, theirs := lw.Binding(b.AtomID), next.Binding(b.AtomID)
		if next.Atom(b.AtomID) == nil {
			continue
		}
		switch {
		case was == nil && theirs == nil:
			next.Bindings = append(next.Bindings, b)
		case was != nil && theirs != nil && sameBinding(*was, *theirs):
			*theirs = b
		}
	}
	for _, g := range ours.ORGroups {
		was, theirs := lw.ORGroup(g.Name), next.ORGroup(g.Name)
		if was != nil && theirs != nil && sameGroup(*was, *theirs) {
			*theirs = g
		}
	}
	if engine.SameIgnoringLines(lw.Decompositions, fs.Decompositions) {
		next.Decompositions = ours.Decompositions
	}
	if engine.SameIgnoringLines(lw.Trail, fs.Trail) {
		next.Trail = ours.Trail
	}
	return next
}

func sameBinding(a, b state.Binding) bool {
	a.Line, b.Line = 0, 0
	return engine.SameIgnoringLines(a, b)
}

func sameGroup(a, b state.ORGroup) bool {
	a.Line, b.Line = 0, 0
	return engine.SameIgnoringLines(a, b)
}

// writtenStamp is the stamp of the file the engine's store last put in
// place: taken from the file before it replaced the old one, so a change
// made right after the write is still noticed.
func (l *localHost) writtenStamp() fileStamp {
	if fi := l.store.Written(); fi != nil {
		return fileStamp{fi: fi}
	}
	return stampOf(l.opts.StateFile)
}
