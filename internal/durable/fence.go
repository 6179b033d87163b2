package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// One attempt, one agent at a time. Temporal retries an activity whose
// heartbeats stop reaching it (its heartbeat timeout, 30 s for attempts)
// on any worker, while the worker that ran it may still be running its
// agent: cut off from Temporal (a network or a dev server down), it
// cannot be told. So both sides keep to a rule:
//
//   - a worker whose heartbeats have not reached Temporal for the heartbeat
//     timeout less three heartbeat intervals gives the activity up: its
//     agent is killed and its worktree removed before Temporal could have
//     timed it out; it does so too as soon as Temporal answers that the
//     try is gone (timed out and retried);
//   - a retried attempt whose previous try may not have ended cleanly (it
//     heartbeated, and did not hand itself back, shutdown.go) waits a
//     heartbeat interval and a little more before its agent starts: the
//     time the previous try's worker, back in touch with Temporal, needs
//     to learn that its try is gone and kill its agent.
//
// The heartbeats that measure this go through the worker's client. The
// SDK's own heartbeat, which brings cancellations, follows each one that
// arrived, and only those: the SDK cancels an activity at the first
// heartbeat it could not deliver (after 2 s), which would kill every
// running agent in an outage of a few seconds that Temporal itself
// forgives for its heartbeat timeout.

// handedBack is the heartbeat detail a try handed back by a stopping
// worker leaves: its agent is dead, its retry need not wait.
const handedBack = "handed back by a stopping worker: its agents were killed and its worktree removed"

// sdkBeatGap is how far apart the SDK's heartbeats are recorded: past its
// throttle, so that it sends each at once, never later from a batch when
// Temporal may no longer be reachable.
const sdkBeatGap = heartbeatThrottle + 500*time.Millisecond

// predecessorSlack is how much longer than a heartbeat interval a retry
// waits for a previous try's worker to learn that its try is gone.
const predecessorSlack = 2 * time.Second

// fence measures how long an activity's heartbeats have not reached
// Temporal.
type fence struct {
	client client.Client
	token  []byte
	every  time.Duration // between heartbeats; each call waits at most this
	within time.Duration // how long without a heartbeat the activity may go on
	lastOK time.Time
}

// fenceFor returns the fence of the activity of ctx, heartbeating every
// every; nil (no fence) outside a worker started by RunWorker or when the
// heartbeat timeout is too short to leave a margin.
func (a *Activities) fenceFor(ctx context.Context, every time.Duration) *fence {
	if a.handBack == nil {
		return nil
	}
	info := activity.GetInfo(ctx)
	within := info.HeartbeatTimeout - 3*every
	if within < every {
		return nil
	}
	return &fence{client: a.handBack.client, token: info.TaskToken, every: every, within: within, lastOK: time.Now()}
}

// check records a heartbeat with details through the client; it says
// whether Temporal answered, and returns why the activity must be given
// up here (nil while it may go on). Without a fence (nil) it says
// answered.
func (f *fence) check(ctx context.Context, details any) (reached bool, giveUp error) {
	if f == nil {
		return true, nil
	}
	rctx, cancel := context.WithTimeout(ctx, f.every)
	err := f.client.RecordActivityHeartbeat(rctx, f.token, details)
	cancel()
	var gone *serviceerror.NotFound
	switch {
	case errors.As(err, &gone):
		return false, errors.New("Temporal no longer has this try of the activity (it timed out and is retried): given up here")
	case err == nil || temporal.IsCanceledError(err) || errors.Is(err, activity.ErrActivityPaused) || errors.Is(err, activity.ErrActivityReset):
		// Temporal answered (what it asked for is the SDK's to deliver).
		f.lastOK = time.Now()
		return true, nil
	}
	if since := time.Since(f.lastOK); since >= f.within {
		return false, fmt.Errorf("no heartbeat reached Temporal for %s: given up here before Temporal retries it elsewhere", since.Round(time.Second))
	}
	return false, nil
}

// awaitPredecessor waits, when the activity of ctx is a retry whose
// previous try may still have its agent running on another worker, until
// that worker has had time to learn that its try is gone.
func (a *Activities) awaitPredecessor(ctx context.Context) error {
	if a.handBack == nil || !activity.IsActivity(ctx) || activity.GetInfo(ctx).Attempt <= 1 || !activity.HasHeartbeatDetails(ctx) {
		return nil
	}
	var last string
	if err := activity.GetHeartbeatDetails(ctx, &last); err == nil && last == handedBack {
		return nil
	}
	every := a.Heartbeat
	if every <= 0 {
		every = DefaultHeartbeat
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(every + predecessorSlack):
		return nil
	}
}
