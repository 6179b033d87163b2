package server

import (
	"io"
	"path/filepath"
	"time"

	"github.com/aot-loop/aot/internal/ccw"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// The CCW view of each loop (package ccw) lives in {workspace}/.loop/.

func viewPath(l *loop) string { return filepath.Join(loopsDir(l.workspace), l.id+".json") }

func validID(id string) bool { return ccw.ValidID(id) }

func newID(now time.Time, rnd io.Reader) string { return ccw.NewID(now, rnd) }

func idFor(stateFile string, created time.Time) string {
	abs, err := filepath.Abs(stateFile)
	if err != nil {
		abs = stateFile
	}
	return ccw.IDFor(abs, created)
}

func dirOf(path string) string { return filepath.Dir(path) }

func (l *loop) meta() ccw.Meta {
	return ccw.Meta{ID: l.id, Title: l.title, Description: l.description, Workspace: l.workspace, StateFile: l.stateFile, CreatedAt: l.created}
}

// readMeta recovers a loop's identity from its CCW view, rebuilding a
// damaged or missing {id}.json from the progress files and the journal.
func readMeta(dir, id, stateFile string, s *state.State, evs []journal.Event) (ccw.Meta, bool, error) {
	m := ccw.Meta{ID: id, Workspace: filepath.Dir(dir), StateFile: stateFile}
	l, rebuilt, err := ccw.Recover(dir, id, m, s, evs)
	if err != nil {
		return m, false, err
	}
	return metaOf(l, m), rebuilt, nil
}

// buildView is the loop's CCW document now.
func (s *Server) buildView(l *loop) (ccw.Loop, error) {
	st, err := l.read()
	if err != nil {
		return ccw.Loop{}, err
	}
	evs := l.snapshot()
	return ccw.BuildWith(l.meta(), st, evs, l.engine().Paused, l.checkOutputs(evs)), nil
}

// checkOutputs are the whole outputs of the last verification's checks,
// read again only when a new verification ran.
func (l *loop) checkOutputs(evs []journal.Event) map[string]string {
	last := 0
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == journal.Verify {
			last = i + 1
			break
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if last != l.outputsSeq {
		l.outputs = ccw.CheckOutputs(l.stateFile, evs)
		l.outputsSeq = last
	}
	return l.outputs
}

// writeView writes the loop's CCW files.
func (s *Server) writeView(l *loop) error {
	l.viewMu.Lock()
	defer l.viewMu.Unlock()
	v, err := s.buildView(l)
	if err != nil {
		return err
	}
	return s.putView(l, v)
}

// putView writes v, the loop's view, into the workspace's CCW folder
// (viewMu held).
func (s *Server) putView(l *loop, v ccw.Loop) error {
	dir := loopsDir(l.workspace)
	// The logs in the progress folder are appended to, through any link.
	prog := ccw.ProgressDir(dir, l.id)
	for _, p := range []string{dir, prog, filepath.Join(prog, "changes.log"), filepath.Join(prog, "debug.log")} {
		if err := s.reg.within(p); err != nil {
			return err
		}
	}
	if err := ccw.Write(dir, v, l.snapshot()); err != nil {
		return err
	}
	l.mu.Lock()
	l.viewStamp = stampOf(viewPath(l))
	l.mu.Unlock()
	return nil
}

func metaOf(l ccw.Loop, m ccw.Meta) ccw.Meta {
	m.Title, m.Description, m.CreatedAt = l.Title, l.Description, l.CreatedAt
	if l.StateFile != "" {
		m.StateFile = l.StateFile
	}
	return m
}
