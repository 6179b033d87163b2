package ccw

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// Recover reads the Loop document of id from dir. A document that is
// missing or damaged (not JSON, cut short, another loop's) is rebuilt: the
// API's fields (title, description, created_at, and whether it was paused)
// from summary.md's front matter, where they are not already set in m, and
// the rest from the state (nil when it cannot be read) and the journal, as
// Build does. rebuilt says the document was rebuilt; Recover writes
// nothing, so the caller writes the rebuilt view with Write. With neither
// a document, nor progress files, nor a state or journal, there is nothing
// to rebuild from: the error wraps fs.ErrNotExist.
func Recover(dir, id string, m Meta, s *state.State, events []journal.Event) (l Loop, rebuilt bool, err error) {
	if !ValidID(id) {
		return Loop{}, false, fmt.Errorf("ccw: %q is not a loop id", id)
	}
	data, err := os.ReadFile(DocPath(dir, id))
	switch {
	case err == nil:
		if json.Unmarshal(data, &l) == nil && l.LoopID == id {
			return l, false, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return Loop{}, false, fmt.Errorf("ccw: %w", err)
	}
	m.ID = id
	paused := false
	summary, err := os.ReadFile(filepath.Join(ProgressDir(dir, id), summaryFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Loop{}, false, fmt.Errorf("ccw: %w", err)
	}
	fm, found := parseFrontMatter(summary)
	found = found && fm.LoopID == id
	if !found && s == nil && len(events) == 0 {
		return Loop{}, false, fmt.Errorf("ccw: loop %s: no document, progress files, state or journal to rebuild it from: %w", id, fs.ErrNotExist)
	}
	if found {
		if m.Title == "" {
			m.Title = fm.Title
		}
		if m.Description == "" {
			m.Description = fm.Description
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = fm.CreatedAt
		}
		paused = fm.Status == StatusPaused
	}
	l = Build(m, s, events, paused)
	if found && s == nil {
		l.Status = fm.Status // the state is gone: its last known status
	}
	return l, true, nil
}
