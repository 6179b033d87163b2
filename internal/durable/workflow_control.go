package durable

import (
	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// A person's controls of a running loop: pause and resume are signals,
// a redirect is an Update (validated first, then applied by the Core or
// refused with the reason), the status is a query. Each acts through the
// Core, as aot pause, aot resume and aot redirect act on a local engine.

func (l *loop) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func(since, logsSince int) (Status, error) {
		return l.status(since, logsSince), nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateRedirect,
		func(ctx workflow.Context, ch engine.Change) error {
			if err := workflow.Await(ctx, func() bool { return !l.deciding || l.ending }); err != nil {
				return err
			}
			if l.ending {
				return errEnded
			}
			_, err := l.core.Redirect(ch)
			l.wake.SendAsync(struct{}{})
			return err
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, ch engine.Change) error {
			if l.ending {
				return errEnded
			}
			return l.core.Check(ch)
		}})
}

// status is what the status query answers: the state, what runs, the
// spend, the events after since and the agents' logs after logsSince.
func (l *loop) status(since, logsSince int) Status {
	u, _ := l.core.Usage()
	s := l.core.State()
	st := Status{State: state.Marshal(s), Paused: l.core.Paused() != nil, Pause: l.core.Paused(), Running: []Running{}, Usage: u,
		Iteration: s.Control.Iteration, Done: l.outcome != nil, Outcome: l.outcome, EventSeq: l.eventSeq}
	for _, a := range l.core.Running() {
		st.Running = append(st.Running, Running{Role: string(a.Role), Atom: a.Atom, Attempt: a.N, Started: a.Started})
	}
	if n := l.eventSeq - since; n > 0 {
		n = min(n, len(l.events))
		st.Events = append([]journal.Event{}, l.events[len(l.events)-n:]...)
	}
	st.Logs, st.LogSeq = l.logsAfter(logsSince), l.logSeq
	return st
}

// controls applies the stop, pause and resume signals that have arrived.
func (l *loop) controls() {
	for {
		var r StopRequest
		ok, _ := l.stopCh.ReceiveAsyncWithMoreFlag(&r)
		if !ok {
			break
		}
		reason := r.Reason
		if reason == "" {
			reason = "aot stop"
		}
		l.core.Stop(reason)
	}
	for {
		var p PauseRequest
		ok, _ := l.pauseCh.ReceiveAsyncWithMoreFlag(&p)
		if !ok {
			break
		}
		_ = l.core.Pause(p.Kill, p.Reason)
	}
	for {
		var r ResumeRequest
		ok, _ := l.resumeCh.ReceiveAsyncWithMoreFlag(&r)
		if !ok {
			break
		}
		_ = l.core.Resume(r.Reason) // not paused: nothing to do
	}
}
