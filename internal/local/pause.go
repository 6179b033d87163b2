package local

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// A local run records a pause in .claude/aot-loop/paused.json so that
// other processes (aot status, the server) can tell; the journal has a
// pause and a resume event. A pause never outlives its run silently: a new
// aot run is a person's explicit start and resumes the loop, saying so.

const (
	controlPause  = "pause"
	controlResume = "resume"
)

func pausePath(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "paused.json")
}

// Paused reads the pause marker of stateFile's loop. It says nothing about
// whether an engine still runs; callers check the run lock for that.
func Paused(stateFile string) (engine.PauseInfo, bool) {
	data, err := os.ReadFile(pausePath(stateFile))
	if err != nil {
		return engine.PauseInfo{}, false
	}
	var p engine.PauseInfo
	if json.Unmarshal(data, &p) != nil {
		return engine.PauseInfo{}, false
	}
	return p, true
}

// SendPause asks the running engine of stateFile to pause and waits for
// its answer until ctx ends (see send for what is left then).
func SendPause(ctx context.Context, stateFile string, kill bool, reason string) error {
	return send(ctx, stateFile, "pause", requestDoc{Control: controlPause, Kill: kill, Change: engine.Change{Reason: reason}})
}

// SendResume asks the running engine of stateFile to resume, as SendPause.
func SendResume(ctx context.Context, stateFile, reason string) error {
	return send(ctx, stateFile, "resume", requestDoc{Control: controlResume, Change: engine.Change{Reason: reason}})
}

// writePause records p where aot status and the server see it.
func writePause(stateFile string, p *engine.PauseInfo) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(journal.DirFor(stateFile), journal.DirMode); err != nil {
		return err
	}
	return state.WriteFile(pausePath(stateFile), data, journal.FileMode)
}

// removePause removes the pause marker, if any.
func removePause(stateFile string) error {
	if err := os.Remove(pausePath(stateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// clearPause removes a pause marker left by an earlier run: a new run is
// a person's explicit start.
func (l *localHost) clearPause() {
	if p, ok := Paused(l.opts.StateFile); ok {
		_ = os.Remove(pausePath(l.opts.StateFile))
		l.c.Event(journal.Event{Type: journal.Resume, Reason: "a new aot run resumes the loop paused since " + p.Since.Format(time.RFC3339)})
	}
}
