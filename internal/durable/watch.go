package durable

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// A loop's workflow does nothing while no worker polls its task queue:
// Temporal keeps its tasks waiting, and says nothing. What follows lets the
// client commands see that and say it.

// pollerFresh is how recently a poller must have polled to count as
// polling. Temporal lists a task queue's pollers for minutes after they
// stop; a live worker polls again at least once a long poll (a minute).
const pollerFresh = 75 * time.Second

// Pollers are the identities of the workers that poll a task queue lately,
// for its workflow tasks and for its activity tasks (an aot worker polls
// both; while all its activity slots are taken it polls only workflow
// tasks, so those are what says a worker is there).
type Pollers struct {
	Queue    string
	Workflow []string
	Activity []string
}

// Serving reports whether a worker polls the queue for workflow tasks:
// the workflow can go on, and answer.
func (p Pollers) Serving() bool { return len(p.Workflow) > 0 }

// Missing says that no worker serves the queue ("" when one does).
func (p Pollers) Missing() string {
	switch {
	case p.Serving():
		return ""
	case len(p.Activity) > 0:
		return fmt.Sprintf("no worker polls task queue %s for workflow tasks (only for activities: %s)", p.Queue, strings.Join(p.Activity, ", "))
	}
	return fmt.Sprintf("no worker polls task queue %s", p.Queue)
}

// Names lists the identities polling, each once.
func (p Pollers) Names() []string {
	all := slices.Concat(p.Workflow, p.Activity)
	slices.Sort(all)
	return slices.Compact(all)
}

// QueuePollers asks Temporal (DescribeTaskQueue) which workers poll queue.
func QueuePollers(ctx context.Context, c client.Client, queue string) (Pollers, error) {
	p := Pollers{Queue: queue}
	for _, kind := range []struct {
		typ  enumspb.TaskQueueType
		into *[]string
	}{{enumspb.TASK_QUEUE_TYPE_WORKFLOW, &p.Workflow}, {enumspb.TASK_QUEUE_TYPE_ACTIVITY, &p.Activity}} {
		resp, err := c.DescribeTaskQueue(ctx, queue, kind.typ)
		if err != nil {
			return Pollers{Queue: queue}, fmt.Errorf("describe task queue %s: %w", queue, err)
		}
		for _, pi := range resp.GetPollers() {
			if t := pi.GetLastAccessTime(); t != nil && time.Since(t.AsTime()) > pollerFresh {
				continue
			}
			*kind.into = append(*kind.into, pi.GetIdentity())
		}
	}
	return p, nil
}

// Execution is what Temporal says of a loop's workflow without asking the
// workflow itself (which needs a worker).
type Execution struct {
	Status    string // Temporal's word: Running, Completed, Canceled, ...
	Running   bool
	TaskQueue string
}

// Describe asks Temporal where the marker's workflow stands.
func Describe(ctx context.Context, c client.Client, m Marker) (Execution, error) {
	d, err := c.DescribeWorkflowExecution(ctx, m.WorkflowID, "")
	if err != nil {
		return Execution{}, err
	}
	info := d.GetWorkflowExecutionInfo()
	e := Execution{Status: statusWord(info.GetStatus()), Running: info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, TaskQueue: info.GetTaskQueue()}
	if e.TaskQueue == "" {
		e.TaskQueue = m.TaskQueue
	}
	return e, nil
}

func statusWord(s enumspb.WorkflowExecutionStatus) string {
	w := strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_")
	if w == "" {
		return "unknown"
	}
	return strings.ToUpper(w[:1]) + strings.ToLower(w[1:])
}

// WatchOptions tune WatchWorkers.
type WatchOptions struct {
	Every  time.Duration // how often the queue is looked at (default 2s)
	Repeat time.Duration // how often a lasting absence is said again (default 30s)
	Say    func(string)
}

// WatchWorkers says when no worker polls queue: at its first look, again
// every Repeat while that lasts, and once when workers poll again. It
// returns when ctx ends.
func WatchWorkers(ctx context.Context, c client.Client, queue string, o WatchOptions) {
	every, repeat := o.Every, o.Repeat
	if every <= 0 {
		every = 2 * time.Second
	}
	if repeat <= 0 {
		repeat = 30 * time.Second
	}
	var since, said time.Time // since when nobody serves the queue; when it was last said
	var errSaid time.Time     // when a failure to look was last said
	for {
		look, cancel := context.WithTimeout(ctx, every+5*time.Second)
		p, err := QueuePollers(look, c, queue)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// Temporal unreachable, say: said once, and again every
			// repeat while it lasts.
			if errSaid.IsZero() || time.Since(errSaid) >= repeat {
				o.Say("cannot see who polls the task queue: " + err.Error())
				errSaid = time.Now()
			}
		case !p.Serving():
			errSaid = time.Time{}
			now := time.Now()
			if since.IsZero() {
				since = now
			}
			if said.IsZero() || now.Sub(said) >= repeat {
				wait := ""
				if !said.IsZero() {
					wait = fmt.Sprintf(" (for %s)", now.Sub(since).Round(time.Second))
				}
				o.Say(fmt.Sprintf("%s%s: the loop waits until one does; start one with aot worker --task-queue %s", p.Missing(), wait, queue))
				said = now
			}
		default:
			errSaid = time.Time{}
			if !since.IsZero() {
				o.Say(fmt.Sprintf("worker %s polls task queue %s now: the loop goes on", strings.Join(p.Names(), ", "), queue))
			}
			since, said = time.Time{}, time.Time{}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// Closing is what a stop found: whether the workflow has closed, and if
// not, whether any worker could close it.
type Closing struct {
	Closed  bool
	Status  string   // Temporal's word for where the workflow stands
	Outcome *Outcome // how the loop ended, once closed (nil: Temporal did not say)
	Pollers Pollers
	// Looked says whether Pollers is what Temporal answered.
	Looked bool
}

// AwaitClose waits, up to wait, for the marker's workflow to close, as a
// stop asked. It gives up at once when no worker polls the workflow's task
// queue (nothing would carry the stop out).
func AwaitClose(ctx context.Context, c client.Client, m Marker, wait time.Duration) (Closing, error) {
	deadline := time.Now().Add(wait)
	var cl Closing
	for first := true; ; first = false {
		e, err := Describe(ctx, c, m)
		if err != nil {
			return cl, err
		}
		cl.Status, cl.Closed = e.Status, !e.Running
		if cl.Closed {
			// The result is in the history: no worker needed.
			var out Outcome
			if c.GetWorkflow(ctx, m.WorkflowID, "").Get(ctx, &out) == nil {
				cl.Outcome = &out
			}
			return cl, nil
		}
		if first {
			p, err := QueuePollers(ctx, c, e.TaskQueue)
			cl.Pollers, cl.Looked = p, err == nil
			if cl.Looked && !p.Serving() {
				return cl, nil
			}
		}
		if time.Now().After(deadline) {
			return cl, nil
		}
		select {
		case <-ctx.Done():
			return cl, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
