//go:build temporal

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/durable"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// aot run --engine temporal, and the local commands that reach a loop
// running on Temporal (its marker is beside the journal). Built with the
// temporal tag into aot-temporal only: the Temporal SDK would add its
// start-up to every aot command; aot execs aot-temporal for these
// (temporal_exec.go).

// runTemporal starts the loop's workflow (or reattaches to it) and keeps
// the local state file in step until it ends; Ctrl-C detaches.
func runTemporal(ctx context.Context, opts *runOptions) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	c, err := clientDial(opts.IO.ErrOut, os.Getenv)(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	so := temporalStartOptions(opts)
	so.Address, so.Namespace = durable.Where()
	if opts.AgentCommand != "" && opts.Attach == "" {
		fmt.Fprintln(opts.IO.ErrOut, "[temporal] --agent-command (or AOT_AGENT_COMMAND): workers must allow the loop's own command (aot worker --allow-loop-command PATTERN, --allow-loop-commands) unless it is theirs (aot worker --agent-command); a worker that refuses it stops the loop")
	}
	m, attached, err := durable.Start(ctx, c, so)
	if err != nil {
		if ctx.Err() != nil {
			// A signal while the workflow was being started: as for a
			// detach, this process stopped, not (necessarily) the loop.
			fmt.Fprintf(opts.IO.ErrOut, "aot run: %v before the loop's workflow was followed (exit %d); if it started, aot run --engine temporal attaches to it and aot stop stops it\n",
				context.Cause(ctx), engine.ManualStop.ExitCode())
			return reported(engine.ManualStop.ExitCode())
		}
		return err
	}
	var sayMu sync.Mutex // the watch below says things too
	say := func(s string) {
		if !opts.Quiet {
			sayMu.Lock()
			defer sayMu.Unlock()
			fmt.Fprintf(opts.IO.ErrOut, "[temporal] %s\n", s)
		}
	}
	switch {
	case opts.Attach != "":
		say(fmt.Sprintf("attached to workflow %s on purpose (--attach): its loop is projected into %s", m.WorkflowID, opts.Global.StateFile))
	case attached:
		say(fmt.Sprintf("reattached to workflow %s (running since %s)", m.WorkflowID, m.Started.Format(time.RFC3339)))
	default:
		say(fmt.Sprintf("started workflow %s on task queue %s; integration branch %s on %s", m.WorkflowID, m.TaskQueue, m.Base, m.Repo))
	}
	if m.Note != "" {
		say(m.Note)
	}
	// One line per journal event of the workflow, as a local run prints
	// them, as they reach the local journal.
	show := func(ev journal.Event) {
		if !opts.Quiet {
			say(fmt.Sprintf("%s %s  %s", ev.Time.Local().Format("15:04:05"), ev.Type, describeEvent(ev)))
		}
	}
	// A loop no worker serves waits in silence on Temporal's side: say so
	// while it lasts (always, even with --quiet: it is why nothing moves).
	watchCtx, endWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		queue := m.TaskQueue
		if e, err := durable.Describe(watchCtx, c, m); err == nil && e.TaskQueue != "" {
			queue = e.TaskQueue
		}
		durable.WatchWorkers(watchCtx, c, queue, durable.WatchOptions{Say: func(line string) {
			sayMu.Lock()
			defer sayMu.Unlock()
			fmt.Fprintf(opts.IO.ErrOut, "[temporal] %s\n", line)
		}})
	}()
	out, err := durable.AttachWith(ctx, c, m, opts.Global.StateFile, durable.AttachOptions{Every: 500 * time.Millisecond, Say: say, Event: show})
	endWatch()
	<-watched
	if err != nil {
		return err
	}
	if out == nil {
		// This process was stopped (Ctrl-C, SIGTERM, SIGHUP), not the
		// loop: it ends with manual_stop's code, as a local run would.
		fmt.Fprintf(opts.IO.Out, "detached (%v; exit %d): the loop goes on as workflow %s; aot run --engine temporal reattaches, aot stop stops it\n",
			context.Cause(ctx), engine.ManualStop.ExitCode(), m.WorkflowID)
		return reported(engine.ManualStop.ExitCode())
	}
	durable.ForgetMarker(opts.Global.StateFile)
	landing := landTemporal(opts, m, out)
	if opts.Global.JSON { // the document aot help run describes, as a local run's
		doc := temporalOutcome(out, opts.Global.StateFile, m.Started)
		if landing != "" {
			doc.Landing = landing
		}
		writeJSON(opts.IO.Out, runDoc(doc))
	} else {
		verdict := opts.IO.status("stopped")
		if out.Reason == string(engine.Completed) {
			verdict = opts.IO.status("completed")
		}
		fmt.Fprintf(opts.IO.Out, "%s (%s): %s\n", verdict, out.Reason, out.Message)
		if landing != "" {
			fmt.Fprintln(opts.IO.Out, landing)
		} else {
			fmt.Fprintf(opts.IO.Out, "the merged work is on branch %s of %s: git fetch %s %s && git merge FETCH_HEAD takes it\n", m.Base, m.Repo, opts.Remote, m.Base)
		}
	}
	if out.ExitCode != 0 {
		return reported(out.ExitCode)
	}
	return nil
}

// temporalStartOptions are what the workflow starts with: the run's
// settings whole, the agents the workers are to run, where to find them.
func temporalStartOptions(opts *runOptions) durable.StartOptions {
	return durable.StartOptions{
		StateFile: opts.Global.StateFile, TaskQueue: opts.TaskQueue, Remote: opts.Remote,
		Agent:    durable.AgentChoice{Agent: opts.Agent, Model: opts.Model, Command: opts.AgentCommand, Roles: rolesMap(opts.Roles)},
		Settings: opts.Settings, Attach: opts.Attach,
	}
}

// temporalOutcome is a workflow's outcome as a local run reports it: the
// workflow's Core gives it whole; a workflow cancelled from outside (or
// one that ended before the Core's outcome was recorded) has its counts
// read from the projected state file.
func temporalOutcome(out *durable.Outcome, stateFile string, started time.Time) engine.Outcome {
	if out.Run != nil {
		return *out.Run
	}
	doc := engine.Outcome{Reason: engine.Reason(out.Reason), ExitCode: out.ExitCode, Message: out.Message}
	if s, err := state.NewStore(stateFile).Read(); err == nil {
		doc.Iterations, doc.Unresolved = s.Control.Iteration, dag.Unresolved(s)
		for i := range s.Atoms {
			if s.Atoms[i].Status == state.StatusResolved {
				doc.Resolved++
			}
		}
	}
	if !started.IsZero() {
		doc.Elapsed = time.Since(started).Round(time.Millisecond).String()
	}
	return doc
}

// landTemporal lands a completed loop's work on the person's branch, as a
// local run does, and says what it did ("" for a loop that did not
// complete: its work stays on the remote's integration branch).
func landTemporal(opts *runOptions, m durable.Marker, out *durable.Outcome) string {
	if out.Reason != string(engine.Completed) || opts.Attach != "" {
		return "" // another clone's loop, attached on purpose, lands there
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := durable.Land(ctx, opts.Global.StateFile, m)
	if err != nil {
		return fmt.Sprintf("the merged work could not be landed (%v); it is on branch %s of %s: git fetch %s %s && git merge FETCH_HEAD takes it", err, m.Base, m.Repo, opts.Remote, m.Base)
	}
	return l.Message
}

func rolesMap(roles []string) map[string]string {
	if len(roles) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, r := range roles {
		if k, v, ok := strings.Cut(r, "="); ok {
			m[k] = v
		}
	}
	return m
}

// workflows reaches the workflows of loops on Temporal through one client,
// dialled when first needed: aot stop and the others use it once, aot serve
// for as long as it serves.
type workflows struct {
	dial func(ctx context.Context) (client.Client, error)
	mu   sync.Mutex
	c    client.Client
}

func newWorkflows() *workflows { return &workflows{dial: clientDial(os.Stderr, os.Getenv)} }

// clientDial dials Temporal for a client command, the SDK's log on errOut
// from the level AOT_LOG_LEVEL names (default warn: connection trouble).
func clientDial(errOut io.Writer, getenv func(string) string) func(ctx context.Context) (client.Client, error) {
	return func(ctx context.Context) (client.Client, error) {
		level := slog.LevelWarn
		if word := getenv(envLogLevel); word != "" {
			l, err := durable.ParseLogLevel(word)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", envLogLevel, err)
			}
			level = l
		}
		return durable.DialWith(ctx, durable.DialOptions{Log: durable.SDKLog(errOut, level)})
	}
}

// logTo sends the worker's SDK log (its polls failing while the server
// is away, activities failing and retried) to stderr from --log-level, else
// $AOT_LOG_LEVEL, else info.
func (opts *workerOptions) logTo() error {
	word, from := opts.LogLevel, "--log-level"
	if word == "" {
		word, from = opts.getenv(envLogLevel), envLogLevel
	}
	level := slog.LevelInfo
	if word != "" {
		l, err := durable.ParseLogLevel(word)
		if err != nil {
			return usagef("%s: %v", from, err)
		}
		level = l
	}
	logger := durable.SDKLog(opts.IO.ErrOut, level)
	opts.dial = func(ctx context.Context) (client.Client, error) {
		return durable.DialWith(ctx, durable.DialOptions{Log: logger, Metrics: opts.sdkMetrics})
	}
	return nil
}

// envLogLevel sets the level of the Temporal SDK's log for every command
// that talks to Temporal; aot worker's --log-level wins over it.
const envLogLevel = "AOT_LOG_LEVEL"

// Close closes the client, if one was dialled.
func (w *workflows) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c != nil {
		w.c.Close()
		w.c = nil
	}
	return nil
}

func (w *workflows) client(ctx context.Context) (client.Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c == nil {
		c, err := w.dial(ctx)
		if err != nil {
			return nil, err
		}
		w.c = c
	}
	return w.c, nil
}

// call runs fn on the workflow of stateFile's loop. A workflow Temporal no
// longer has, or one that has ended for a signal or a cancel, is no engine
// (engine.ErrNoEngine); a refused change stays an engine.RefusedError;
// anything else is said with the workflow's id.
func (w *workflows) call(ctx context.Context, stateFile string, fn func(ctx context.Context, c client.Client, m durable.Marker) error) error {
	m, ok := durable.ReadMarker(stateFile)
	if !ok {
		return fmt.Errorf("the Temporal marker of %s is missing or unreadable: aot run --engine temporal writes it", stateFile)
	}
	c, err := w.client(ctx)
	if err != nil {
		return fmt.Errorf("the loop runs on Temporal (workflow %s): %w", m.WorkflowID, err)
	}
	err = fn(ctx, c, m)
	var re *engine.RefusedError
	var gone *serviceerror.NotFound
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re):
		return err
	case errors.As(err, &gone):
		return &engine.ErrNoEngine{StateFile: stateFile}
	}
	return fmt.Errorf("workflow %s: %w", m.WorkflowID, err)
}

// sync asks the workflow where it stands and projects its state into the
// state file: the workflow is the truth, and the file may be behind while
// no aot run is attached.
//
// Answering a query takes a worker: with none polling the workflow's task
// queue, the workflow is not asked (the query would wait for one), and
// the doc says what Temporal itself knows, with the error a *noWorkerError.
func (w *workflows) sync(ctx context.Context, stateFile string) (*workflowDoc, error) {
	var doc *workflowDoc
	var edited error // a hand edit, kept aside: said, and the file is in step
	err := w.call(ctx, stateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		e, err := durable.Describe(ctx, c, m)
		if err != nil {
			return err
		}
		pollers, nw := unserved(ctx, c, m, e)
		if nw != nil {
			doc = &workflowDoc{ID: m.WorkflowID, Running: e.Running, Status: e.Status, NoWorker: true, Attempts: []workflowAttemptDoc{},
				TaskQueue: e.TaskQueue, Workers: []string{}}
			return nw
		}
		qctx, cancel := context.WithTimeout(ctx, queryWait)
		defer cancel()
		st, err := durable.Query(qctx, c, m)
		if err != nil {
			if qctx.Err() != nil && ctx.Err() == nil {
				return fmt.Errorf("the workflow did not answer within %s (its workers may be busy or unreachable): %w", queryWait, err)
			}
			return err
		}
		if err := durable.Project(stateFile, st); err != nil {
			var he *durable.HandEditError
			if !errors.As(err, &he) {
				return err
			}
			edited = err
		}
		_, _ = durable.JournalRetries(ctx, c, m, stateFile) // Temporal's retries, journaled once; the status stands without
		doc = &workflowDoc{ID: m.WorkflowID, Running: !st.Done, Paused: st.Paused, Attempts: []workflowAttemptDoc{}}
		doc.Status, doc.TaskQueue, doc.Workers = e.Status, e.TaskQueue, pollers.Names()
		if doc.Workers == nil {
			doc.Workers = []string{}
		}
		if p := st.Pause; p != nil {
			doc.PausedSince, doc.PausedKill = &p.Since, p.Kill
		}
		for _, r := range st.Running {
			doc.Attempts = append(doc.Attempts, workflowAttemptDoc{Atom: r.Atom, Attempt: r.Attempt, Started: r.Started})
		}
		if st.Outcome != nil {
			doc.Outcome = st.Outcome.Reason
		}
		return nil
	})
	if err == nil {
		err = edited
	}
	return doc, err
}

// queryWait bounds the status query: a workflow with workers answers in
// milliseconds.
const queryWait = 8 * time.Second

// noWorkerError: the workflow could not be asked, no worker polls its
// task queue.
type noWorkerError struct {
	id      string
	pollers durable.Pollers
}

func (e *noWorkerError) Error() string {
	return fmt.Sprintf("%s, so workflow %s cannot answer or go on until one does (aot worker --task-queue %s)", e.pollers.Missing(), e.id, e.pollers.Queue)
}

// unserved says when no worker polls the task queue of the running
// workflow e (nil when one does, when it has ended, or when Temporal could
// not say), with the workers that poll it.
func unserved(ctx context.Context, c client.Client, m durable.Marker, e durable.Execution) (durable.Pollers, *noWorkerError) {
	if !e.Running {
		return durable.Pollers{Queue: e.TaskQueue}, nil
	}
	p, err := durable.QueuePollers(ctx, c, e.TaskQueue)
	if err == nil && !p.Serving() {
		return p, &noWorkerError{id: m.WorkflowID, pollers: p}
	}
	return p, nil
}

func (w *workflows) stop(ctx context.Context, stateFile, reason string) error {
	return w.call(ctx, stateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		return durable.Cancel(ctx, c, m, reason)
	})
}

func (w *workflows) pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	return w.call(ctx, stateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		return durable.Signal(ctx, c, m, durable.SignalPause, durable.PauseRequest{Kill: kill, Reason: reason})
	})
}

func (w *workflows) resume(ctx context.Context, stateFile, reason string) error {
	return w.call(ctx, stateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		return durable.Signal(ctx, c, m, durable.SignalResume, durable.ResumeRequest{Reason: reason})
	})
}

// redirect sends the change as an Update, which the workflow validates:
// with no worker to do so it would wait for one, so it is refused at once.
func (w *workflows) redirect(ctx context.Context, stateFile string, ch engine.Change) error {
	return w.call(ctx, stateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		if e, err := durable.Describe(ctx, c, m); err == nil {
			if _, nw := unserved(ctx, c, m, e); nw != nil {
				return nw
			}
		}
		return durable.Redirect(ctx, c, m, ch)
	})
}
