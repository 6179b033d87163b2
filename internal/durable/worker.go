package durable

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/worker"

	"github.com/aot-loop/aot/internal/agent"
)

// WorkerOptions configure [RunWorker].
type WorkerOptions struct {
	Client    client.Client
	TaskQueue string // default DefaultTaskQueue
	// CacheDir holds the clones, worktrees and agent logs (see Activities).
	CacheDir string
	// Identity names the worker in Temporal and in the attempts' results;
	// default pid@host.
	Identity string
	// NewAgent builds the agents (see Activities.NewAgent).
	NewAgent func(ch AgentChoice, role agent.Role, dirs AgentDirs) (agent.Agent, error)
	// MaxActivities is how many attempts, merges and verifications run at
	// once on this worker (default 4).
	MaxActivities int
	// Grace is how long a stopping worker lets its running activities
	// finish before their contexts are cancelled: agents killed with their
	// process trees, worktrees removed, and each activity failed at once
	// with a retryable failure (Temporal retries it on another worker
	// without waiting for a heartbeat timeout). Default 10s.
	Grace time.Duration
	// Heartbeat: see Activities.Heartbeat.
	Heartbeat time.Duration
	// Started, when set, is called once the worker polls; ownQueue is the
	// task queue it alone serves, for the merges of what it holds.
	Started func(ownQueue string)
	// Say, when set, takes what a stopping worker did with the work it
	// held (held.go).
	Say func(line string)
	// Listener, when set, serves /healthz (see health) and, with Metrics,
	// /metrics until RunWorker returns.
	Listener net.Listener
	// Metrics, when set, counts the worker's activities; the SDK's own
	// metrics reach it through the client (DialWith).
	Metrics *Metrics
	// BuildID names this worker's code to Temporal: its version in the
	// worker deployment DeploymentName. Workflows stay unversioned (any
	// worker on the queue runs them), so this needs no server setup.
	BuildID string
}

// Default worker settings.
const (
	heartbeatThrottle    = 2 * time.Second
	DefaultMaxActivities = 4
	DefaultGrace         = 10 * time.Second
)

// RunWorker polls the task queue for the loop workflow's tasks and the
// activities until ctx ends; then it stops polling, lets running
// activities finish for o.Grace, cancels what is left, and returns nil.
// Worktrees left in the cache by a worker that died are removed first.
func RunWorker(ctx context.Context, o WorkerOptions) error {
	if o.Client == nil {
		return errors.New("worker: no Temporal client")
	}
	if o.CacheDir == "" {
		return errors.New("worker: no cache folder")
	}
	if o.TaskQueue == "" {
		o.TaskQueue = DefaultTaskQueue
	}
	if o.Identity == "" {
		o.Identity = DefaultIdentity()
	}
	if o.MaxActivities <= 0 {
		o.MaxActivities = DefaultMaxActivities
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	acts := &Activities{Cache: o.CacheDir, Identity: o.Identity, NewAgent: o.NewAgent, Heartbeat: o.Heartbeat,
		OwnQueue: ownQueue(o.TaskQueue, o.Identity)}
	hl, stopHTTP := o.serve()
	defer stopHTTP()
	acts.handBack = &handBack{client: o.Client, identity: o.Identity}
	acts.sweep(ctx)

	w := worker.New(o.Client, o.TaskQueue, o.observed(hl, worker.Options{
		Identity:                           o.Identity,
		MaxConcurrentActivityExecutionSize: o.MaxActivities,
		WorkerStopTimeout:                  o.Grace,
		// Heartbeats reach the server at most this far apart (the SDK
		// would wait 80% of the heartbeat timeout, 24 s): a cancellation
		// (aot stop, a redirect, a speculative winner) reaches the
		// attempt with the next heartbeat's answer, so this is how long
		// an agent may go on after it was stopped.
		MaxHeartbeatThrottleInterval:     heartbeatThrottle,
		DefaultHeartbeatThrottleInterval: heartbeatThrottle,
	}))
	RegisterWorkflow(w)
	acts.Register(w)
	// Its own queue takes only the merges of the commits it holds
	// (held.go), as many at once as its attempts, never waiting for an
	// attempt's slot.
	own := worker.New(o.Client, acts.OwnQueue, o.observed(hl, worker.Options{
		Identity:                           o.Identity,
		MaxConcurrentActivityExecutionSize: o.MaxActivities,
		WorkerStopTimeout:                  o.Grace,
		DisableWorkflowWorker:              true,
		MaxHeartbeatThrottleInterval:       heartbeatThrottle,
		DefaultHeartbeatThrottleInterval:   heartbeatThrottle,
	}))
	acts.registerOwn(own)
	if err := own.Start(); err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		own.Stop()
		return err
	}
	hl.set(true, "")
	if o.Started != nil {
		o.Started(acts.OwnQueue)
	}
	<-ctx.Done()
	hl.set(false, "stopping")
	// What it holds goes to the atoms' branches first, for the merges
	// that wait on it to be made elsewhere once it is gone; meanwhile its
	// own queue still takes them here.
	pctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	n, err := acts.pushHeld(pctx)
	cancel()
	if o.Say != nil && err != nil {
		o.Say(fmt.Sprintf("pushed %d held commits to their atoms' branches; the others' atoms will run again: %v", n, err))
	} else if o.Say != nil && n > 0 {
		o.Say(fmt.Sprintf("pushed %d held commits to their atoms' branches, for their merges on another worker", n))
	}
	// Both stop at once, each giving what runs on it the grace.
	ownStopped := make(chan struct{})
	go func() { own.Stop(); close(ownStopped) }()
	w.Stop()
	<-ownStopped
	// Stop returns as soon as it has cancelled what outlived the grace:
	// wait for those to kill their agents, remove their worktrees and
	// hand themselves back (shutdown.go).
	acts.handBack.wait(cleanupTimeout)
	return nil
}

// Where names the Temporal service and namespace Dial connects to, for
// the line a worker prints.
func Where() (address, namespace string) {
	o, _ := envconfig.LoadDefaultClientOptions()
	address, namespace = o.HostPort, o.Namespace
	if address == "" {
		address = client.DefaultHostPort
	}
	if namespace == "" {
		namespace = client.DefaultNamespace
	}
	return address, namespace
}
