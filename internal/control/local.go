package control

import (
	"context"
	"time"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/local"
	"github.com/aot-loop/aot/internal/runlock"
)

// localLoop is the controls of a loop aot run's engine runs (or none does):
// the engine's client side, which writes its request files and waits for
// their answers with ctx.
type localLoop struct {
	stateFile string
	now       func() time.Time
	ended     *Workflow // the loop's workflow, which has ended (aot status shows it)
}

func (l *localLoop) Kind() Kind { return Local }

func (l *localLoop) Stop(ctx context.Context, reason string) (StopResult, error) {
	res, err := local.Stop(ctx, l.stateFile, reason)
	return StopResult{StopResult: res}, err
}

func (l *localLoop) Pause(ctx context.Context, kill bool, reason string) error {
	return local.Pause(ctx, l.stateFile, kill, reason)
}

func (l *localLoop) Resume(ctx context.Context, reason string) error {
	return local.Resume(ctx, l.stateFile, reason)
}

func (l *localLoop) Redirect(ctx context.Context, c engine.Change) (engine.RedirectResult, error) {
	return local.Redirect(ctx, l.stateFile, c, l.now())
}

// Status reads the run lock and the pause marker: a marker left by an
// engine that died is no pause.
func (l *localLoop) Status(ctx context.Context) (Status, error) {
	pid, held, err := runlock.Holder(l.stateFile)
	if err != nil {
		return Status{Kind: Local}, err
	}
	st := Status{Kind: Local, Running: held, Workflow: l.ended}
	if held {
		st.EnginePID = pid
		if p, ok := local.Paused(l.stateFile); ok {
			st.Paused = &p
		}
	}
	return st, nil
}
