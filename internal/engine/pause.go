package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// Pause holds a running loop at atom granularity: nothing new starts, and
// the agents already running either finish (their results count) or are
// killed (their results discarded, their atoms back to pending), as the
// caller chooses. Bounds do not advance while paused: no sweep ends, and
// the paused time is not charged to max_wall_time. Resume lets it go on.
//
// The engine records a pause in .claude/aot-loop/paused.json so that other
// processes (aot status, the server) can tell; the journal has a pause and a
// resume event. A pause never outlives its engine silently: a new aot run
// is a person's explicit start and resumes the loop, saying so.

const (
	controlPause  = "pause"
	controlResume = "resume"
)

// PauseInfo describes a paused loop.
type PauseInfo struct {
	Since  time.Time `json:"since"`
	Kill   bool      `json:"kill"`
	Reason string    `json:"reason,omitempty"`
}

// ErrNotPaused is the answer to a resume of a loop that is not paused.
var ErrNotPaused = errors.New("the loop is not paused")

func pausePath(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "paused.json")
}

// Paused reads the pause marker of stateFile's loop. It says nothing about
// whether an engine still runs; callers check the run lock for that.
func Paused(stateFile string) (PauseInfo, bool) {
	data, err := os.ReadFile(pausePath(stateFile))
	if err != nil {
		return PauseInfo{}, false
	}
	var p PauseInfo
	if json.Unmarshal(data, &p) != nil {
		return PauseInfo{}, false
	}
	return p, true
}

// SendPause asks the running engine of stateFile to pause and waits for
// its answer until ctx ends (see send for what is left then).
func SendPause(ctx context.Context, stateFile string, kill bool, reason string) error {
	return send(ctx, stateFile, "pause", requestDoc{Control: controlPause, Kill: kill, Change: Change{Reason: reason}})
}

// SendResume asks the running engine of stateFile to resume, as SendPause.
func SendResume(ctx context.Context, stateFile, reason string) error {
	return send(ctx, stateFile, "resume", requestDoc{Control: controlResume, Change: Change{Reason: reason}})
}

// control applies a pause or resume request.
func (e *engine) control(r request) {
	switch r.control {
	case controlPause:
		answer(r, e.pause(r.kill, r.change.Reason))
	case controlResume:
		answer(r, e.resume(r.change.Reason))
	}
}

func (e *engine) pause(kill bool, reason string) error {
	if reason == "" {
		reason = "aot pause"
	}
	if e.book.Paused != nil {
		if kill && !e.book.Paused.Kill {
			e.book.Paused.Kill = true
			e.killRunning("paused: " + reason)
		}
		return e.writePause()
	}
	e.book.Paused = &PauseInfo{Since: e.now(), Kill: kill, Reason: reason}
	if kill {
		e.killRunning("paused: " + reason)
	}
	if err := e.writePause(); err != nil {
		e.book.Paused = nil
		return err
	}
	e.event(journal.Event{Reason: reason}.With(journal.PauseData{Kill: kill, Running: len(e.tasks)}))
	if kill {
		e.say("paused: %s (running agents killed)", reason)
	} else {
		e.say("paused: %s (%s finishing, nothing new starts)", reason, brief.Count(len(e.tasks), "running agent"))
	}
	return e.host.Sync()
}

func (e *engine) resume(reason string) error {
	if e.book.Paused == nil {
		return ErrNotPaused
	}
	if reason == "" {
		reason = "aot resume"
	}
	held := e.now().Sub(e.book.Paused.Since)
	e.book.PausedFor += held
	e.book.Paused = nil
	if err := e.host.ShowPause(nil); err != nil {
		return err
	}
	e.event(journal.Event{Reason: reason}.With(journal.ResumeData{PausedMS: held.Milliseconds()}))
	// A person held the loop: the sweep starts afresh.
	e.newSweep()
	e.say("resumed: %s (paused %s)", reason, held.Round(time.Second))
	return e.host.Sync()
}

func (e *engine) killRunning(why string) {
	for _, id := range e.taskIDs() {
		e.kill(id, why)
	}
}

func (e *engine) writePause() error { return e.host.ShowPause(e.book.Paused) }

// writePause records p where aot status and the server see it.
func writePause(stateFile string, p *PauseInfo) error {
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

// clearPause removes a pause marker left by an earlier engine: a new run is
// a person's explicit start.
func (e *engine) clearPause() {
	if p, ok := Paused(e.opts.StateFile); ok {
		_ = os.Remove(pausePath(e.opts.StateFile))
		e.event(journal.Event{Type: journal.Resume, Reason: "a new aot run resumes the loop paused since " + p.Since.Format(time.RFC3339)})
	}
}

// active is the time this run has been allowed to work: paused time is not
// charged to max_wall_time.
func (e *engine) active() time.Duration {
	d := e.now().Sub(e.book.Start) - e.book.PausedFor
	if e.book.Paused != nil {
		d -= e.now().Sub(e.book.Paused.Since)
	}
	return d
}
