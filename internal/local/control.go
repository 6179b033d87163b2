package local

import (
	"context"
	"fmt"
	"time"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
)

// The controls a person has over a loop, whether or not an engine runs it:
// the CLI and the server call these, so the rules live in one place.

// Stop stops the loop of stateFile: a running engine is asked through the
// state file (it kills its agents and keeps the state) and waited for until
// it exits or ctx ends; without one, the state file is marked stopped with
// its in-progress atoms back to pending. When ctx ends first the error
// wraps ctx.Err() and the stop request stays in the state file: the engine
// still acts on it.
func Stop(ctx context.Context, stateFile, reason string) (engine.StopResult, error) {
	store := state.NewStore(stateFile).RefuseInvalid()
	if reason == "" {
		reason = "aot stop"
	}
	pid, held, err := runlock.Holder(stateFile)
	if err != nil {
		return engine.StopResult{}, err
	}
	res := engine.StopResult{EnginePID: pid}
	if held {
		_, err := store.Update(func(s *state.State) error {
			s.Control.StopRequested = true
			s.Control.StopReason = &reason
			return nil
		})
		if err != nil {
			return res, err
		}
		err = poll(ctx, func() bool {
			_, still, _ := runlock.Holder(stateFile)
			return !still
		})
		if err != nil {
			return res, fmt.Errorf("the engine (pid %d) has not stopped (%w); the stop request stays in the state file", pid, err)
		}
	} else {
		_, err := store.Update(func(s *state.State) error {
			switch s.Control.Status {
			case state.ControlRunning, state.ControlPending:
				s.Control.Status = state.ControlStopped
				r := "manual stop: " + reason
				s.Control.StopReason = &r
				for i := range s.Atoms {
					if s.Atoms[i].Status == state.StatusInProgress {
						s.Atoms[i].Status = state.StatusPending
					}
				}
			}
			s.Control.StopRequested = false
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	s, err := store.Read()
	if err != nil {
		return res, err
	}
	return engine.StopResultOf(s, pid), nil
}

// Redirect applies a person's change: through the running engine (which
// kills the agents whose work it invalidates, waited for as SendRedirect
// says) or, without one, to the state file for the next run. A refused
// change leaves the file byte-identical.
func Redirect(ctx context.Context, stateFile string, c engine.Change, now time.Time) (engine.RedirectResult, error) {
	store := state.NewStore(stateFile).RefuseInvalid()
	_, held, err := runlock.Holder(stateFile)
	if err != nil {
		return engine.RedirectResult{}, err
	}
	before, err := store.Read()
	if err != nil {
		return engine.RedirectResult{}, err
	}
	res := engine.RedirectResult{AppliedBy: "file", Corrections: []string{}}
	if held {
		res.AppliedBy = "engine"
		if err := SendRedirect(ctx, stateFile, c); err != nil {
			return res, err
		}
	} else {
		_, err := store.Update(func(s *state.State) error {
			s.Control.RedirectRequested = false
			if err := engine.Apply(s, c, now); err != nil {
				return &engine.RefusedError{Err: err}
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	after, err := store.Read()
	if err != nil {
		return res, err
	}
	res.Corrections = engine.AddedCorrections(before, after)
	return res, nil
}

// Pause pauses the running loop of stateFile (see SendPause).
func Pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	if _, held, err := runlock.Holder(stateFile); err != nil {
		return err
	} else if !held {
		return &engine.ErrNoEngine{StateFile: stateFile}
	}
	return SendPause(ctx, stateFile, kill, reason)
}

// Resume resumes the paused loop of stateFile (see SendPause).
func Resume(ctx context.Context, stateFile, reason string) error {
	if _, held, err := runlock.Holder(stateFile); err != nil {
		return err
	} else if !held {
		return &engine.ErrNoEngine{StateFile: stateFile}
	}
	return SendResume(ctx, stateFile, reason)
}
