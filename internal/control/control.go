// Package control is a person's controls over a loop, the same from every
// face: aot stop, pause, resume, redirect and status, and the server's API,
// all call a Controller. For chooses it once per state file: the local
// engine's (through the request files it watches) or, for a loop on
// Temporal, its workflow's (through Temporal, which the Temporal side
// provides). Every method is context-first: ending ctx ends its wait.
package control

import (
	"context"
	"time"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// Controller steers one loop.
type Controller interface {
	// Kind says which engine the controls reach.
	Kind() Kind
	// Stop stops the loop and waits until its engine has stopped.
	Stop(ctx context.Context, reason string) (StopResult, error)
	// Pause holds the running loop (kill: its running agents are killed)
	// and waits until its engine holds it.
	Pause(ctx context.Context, kill bool, reason string) error
	// Resume lets a paused loop go on; engine.ErrNotPaused when it is not
	// paused.
	Resume(ctx context.Context, reason string) error
	// Redirect applies a person's change; a change the loop refused is an
	// *engine.RefusedError.
	Redirect(ctx context.Context, c engine.Change) (engine.RedirectResult, error)
	// Status says whether an engine runs the loop and whether it is held.
	Status(ctx context.Context) (Status, error)
}

// Kind is the engine a Controller reaches.
type Kind string

const (
	Local    Kind = "local"    // aot run's engine, on this machine
	Temporal Kind = "temporal" // the loop's Temporal workflow
)

// StopResult is what Stop did.
type StopResult struct {
	engine.StopResult
	// Workflow is the stopped workflow's last answer (a loop on Temporal).
	Workflow *Workflow
}

// Status is where the loop's engine stands.
type Status struct {
	Kind      Kind
	Running   bool              // an engine (a running workflow) drives the loop
	EnginePID int               // the local engine's process; 0 on Temporal
	Paused    *engine.PauseInfo // the pause in force, if any
	Workflow  *Workflow         // what the workflow answered (a loop on Temporal)
}

// For chooses the controls of stateFile's loop, once. A loop with the
// marker aot run --engine temporal leaves is steered through its workflow
// while it runs; t is asked where it stands first, so that what the
// controller says is fresh. A loop whose workflow has ended has no engine:
// the local controls act on its state file, from which the next aot run
// starts. With t nil (no way to Temporal) every loop gets the local ones.
//
// When t cannot be asked, For still returns the Temporal controls: each of
// their methods then fails saying why, and Status says what it could.
func For(ctx context.Context, stateFile string, t Workflows, now func() time.Time) Controller {
	local := &localLoop{stateFile: stateFile, now: now}
	if t == nil || !journal.OnTemporal(stateFile) {
		return local
	}
	wf, err := t.Sync(ctx, stateFile)
	err, notice := answered(wf, err)
	if err == nil && !wf.Running {
		local.ended = &wf
		return local
	}
	return &workflowLoop{t: t, stateFile: stateFile, last: wf, syncErr: err, notice: notice}
}

// readState reads the loop's state file for a result.
func readState(stateFile string) (*state.State, error) { return state.NewStore(stateFile).Read() }
