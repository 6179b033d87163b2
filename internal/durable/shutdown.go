package durable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

// A stopping worker gives its running activities its grace; then the SDK
// cancels their contexts and returns from Stop at once, before they have
// killed their agents, removed their worktrees or said how they ended:
// the process would exit with agents running and worktrees left, and
// Temporal would learn of the attempts only from their heartbeat timeout.
// So every activity of a worker started by RunWorker is counted while it
// runs, and one cut short by the stop answers Temporal itself, after its
// cleanup, with a retryable failure; RunWorker returns once they all have.

// workerStoppedType is the failure type of an activity handed back by a
// stopping worker.
const workerStoppedType = "aot.WorkerStopped"

// answerTimeout bounds the call that hands a cut-short activity back.
const answerTimeout = 10 * time.Second

// handBack counts a worker's running activities and answers for those its
// stop cuts short.
type handBack struct {
	client   client.Client
	identity string
	running  sync.WaitGroup
}

// wait waits, at most for max, until no activity runs; it says whether
// none does.
func (h *handBack) wait(max time.Duration) bool {
	done := make(chan struct{})
	go func() { h.running.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(max):
		return false
	}
}

// stoppedBy says whether ctx, an activity's, ended because its worker
// stopped.
func stoppedBy(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), worker.ErrWorkerShutdown)
}

// answer tells Temporal how an activity cut short by the worker's stop
// ended (its result, else a retryable failure that names this worker) and
// says whether Temporal took it: the SDK must then answer nothing.
func (h *handBack) answer(ctx context.Context, result any, err error) bool {
	if err != nil {
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || !appErr.NonRetryable() {
			// Its text only: Temporal takes an error that wraps
			// context.Canceled for a cancellation nobody asked for.
			err = temporal.NewApplicationError(
				fmt.Sprintf("worker %s stopped: the activity was cut short (%v), its agents killed and its worktree removed, for another worker to retry", h.identity, err),
				workerStoppedType)
		}
		result = nil
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerTimeout)
	defer cancel()
	token := activity.GetInfo(ctx).TaskToken
	// Its retry need not wait for its agent (fence.go).
	_ = h.client.RecordActivityHeartbeat(actx, token, handedBack)
	return h.client.CompleteActivity(actx, token, result, err) == nil
}

// handBackResult wraps an activity with a result (see handBack).
func handBackResult[I, O any](h *handBack, fn func(context.Context, I) (O, error)) func(context.Context, I) (O, error) {
	if h == nil {
		return fn
	}
	return func(ctx context.Context, in I) (O, error) {
		h.running.Add(1)
		defer h.running.Done()
		out, err := fn(ctx, in)
		if stoppedBy(ctx) && activity.IsActivity(ctx) && h.answer(ctx, out, err) {
			var zero O
			return zero, activity.ErrResultPending
		}
		return out, err
	}
}

// handBackError wraps an activity without a result (see handBack).
func handBackError[I any](h *handBack, fn func(context.Context, I) error) func(context.Context, I) error {
	if h == nil {
		return fn
	}
	return func(ctx context.Context, in I) error {
		h.running.Add(1)
		defer h.running.Done()
		err := fn(ctx, in)
		if stoppedBy(ctx) && activity.IsActivity(ctx) && h.answer(ctx, nil, err) {
			return activity.ErrResultPending
		}
		return err
	}
}
