package engine

import (
	"errors"
	"time"

	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/journal"
)

// Pause holds a running loop at atom granularity: nothing new starts, and
// the agents already running either finish (their results count) or are
// killed (their results discarded, their atoms back to pending), as the
// caller chooses. Bounds do not advance while paused: no sweep ends, and
// the paused time is not charged to max_wall_time. Resume lets it go on.
// The driver shows the pause in force to other processes (Host.ShowPause).

// PauseInfo describes a paused loop.
type PauseInfo struct {
	Since  time.Time `json:"since"`
	Kill   bool      `json:"kill"`
	Reason string    `json:"reason,omitempty"`
}

// ErrNotPaused is the answer to a resume of a loop that is not paused.
var ErrNotPaused = errors.New("the loop is not paused")

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

// active is the time this run has been allowed to work: paused time is not
// charged to max_wall_time.
func (e *engine) active() time.Duration {
	d := e.now().Sub(e.book.Start) - e.book.PausedFor
	if e.book.Paused != nil {
		d -= e.now().Sub(e.book.Paused.Since)
	}
	return d
}
