//go:build temporal

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

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
	c, err := durable.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	so := durable.StartOptions{
		StateFile: opts.Global.StateFile, TaskQueue: opts.TaskQueue, Remote: opts.Remote,
		Agent:       durable.AgentChoice{Agent: opts.Agent, Model: opts.Model, Command: opts.AgentCommand, Roles: rolesMap(opts.Roles)},
		MaxParallel: opts.MaxParallel, MaxIterations: opts.MaxIterations, AgentTimeout: opts.AgentTimeout,
		Attach: opts.Attach,
	}
	so.Address, so.Namespace = durable.Where()
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
	say := func(s string) {
		if !opts.Quiet {
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
			fmt.Fprintf(opts.IO.ErrOut, "[temporal] %s %s  %s\n", ev.Time.Local().Format("15:04:05"), ev.Type, describeEvent(ev))
		}
	}
	out, err := durable.AttachWith(ctx, c, m, opts.Global.StateFile, durable.AttachOptions{Every: 500 * time.Millisecond, Say: say, Event: show})
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
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, out)
	} else {
		verdict := opts.IO.status("stopped")
		if out.Reason == string(engine.Completed) {
			verdict = opts.IO.status("completed")
		}
		fmt.Fprintf(opts.IO.Out, "%s (%s): %s\n", verdict, out.Reason, out.Message)
	}
	switch landing := landTemporal(opts, m, out); {
	case opts.Global.JSON:
	case landing != "":
		fmt.Fprintln(opts.IO.Out, landing)
	default:
		fmt.Fprintf(opts.IO.Out, "the merged work is on branch %s of %s: git fetch %s %s && git merge FETCH_HEAD takes it\n", m.Base, m.Repo, opts.Remote, m.Base)
	}
	if out.ExitCode != 0 {
		return reported(out.ExitCode)
	}
	return nil
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

func newWorkflows() *workflows { return &workflows{dial: durable.Dial} }

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
func (w *workflows) sync(ctx context.Context, stateFile string) (*workflowDoc, error) {
	var doc *workflowDoc
	var edited error // a hand edit, kept aside: said, and the file is in step
	err := w.call(ctx, stateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		st, err := durable.Query(ctx, c, m)
		if err != nil {
			return err
		}
		if err := durable.Project(stateFile, st); err != nil {
			var he *durable.HandEditError
			if !errors.As(err, &he) {
				return err
			}
			edited = err
		}
		doc = &workflowDoc{ID: m.WorkflowID, Running: !st.Done, Paused: st.Paused, Attempts: []workflowAttemptDoc{}}
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

func (w *workflows) redirect(ctx context.Context, stateFile string, ch engine.Change) error {
	return w.call(ctx, stateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		return durable.Redirect(ctx, c, m, ch)
	})
}

// onWorkflow runs one of the calls above for a command, with its own
// client and a bound on the whole.
func onWorkflow(fn func(ctx context.Context, w *workflows) error) error {
	w := newWorkflows()
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fn(ctx, w)
}

func temporalStop(opts *stopOptions) error {
	err := onWorkflow(func(ctx context.Context, w *workflows) error {
		return w.stop(ctx, opts.Global.StateFile, opts.Reason)
	})
	if err != nil {
		return err
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, stopDoc{Success: true, Status: state.ControlStopped, Reason: "manual stop: the workflow was cancelled"})
		return nil
	}
	fmt.Fprintln(opts.IO.Out, "the workflow is cancelled: its running attempts are stopped; aot run --engine temporal shows the end")
	return nil
}

func temporalPause(opts *pauseOptions, reason string) error {
	err := onWorkflow(func(ctx context.Context, w *workflows) error {
		if opts.Resume {
			return w.resume(ctx, opts.Global.StateFile, reason)
		}
		return w.pause(ctx, opts.Global.StateFile, opts.Kill, reason)
	})
	if err != nil {
		return err
	}
	if opts.Global.JSON {
		if reason == "" {
			reason = "aot pause" // the workflow's default, as the local engine's
			if opts.Resume {
				reason = "aot resume"
			}
		}
		writeJSON(opts.IO.Out, pauseDoc{Success: true, Paused: !opts.Resume, Kill: opts.Kill && !opts.Resume, Reason: reason})
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "signal sent to the loop's workflow (resume: %v)\n", opts.Resume)
	return nil
}

func temporalRedirect(opts *redirectOptions) error {
	err := onWorkflow(func(ctx context.Context, w *workflows) error {
		return w.redirect(ctx, opts.Global.StateFile, opts.Change)
	})
	if err != nil {
		return err
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, redirectDoc{Success: true, AppliedBy: "engine", Corrections: []string{}})
		return nil
	}
	fmt.Fprintln(opts.IO.Out, "redirected, applied by the loop's workflow")
	return nil
}

// temporalSync brings the state file in step with the workflow before aot
// status shows it, and says what the workflow answered (nil when it could
// not be asked: the file may then be behind, and aot status says so).
func temporalSync(opts *statusOptions) *workflowDoc {
	var doc *workflowDoc
	err := onWorkflow(func(ctx context.Context, w *workflows) (err error) {
		doc, err = w.sync(ctx, opts.Global.StateFile)
		return err
	})
	var he *durable.HandEditError
	switch {
	case errors.As(err, &he):
		fmt.Fprintf(opts.IO.ErrOut, "aot: %v\n", err)
	case err != nil:
		fmt.Fprintf(opts.IO.ErrOut, "aot: the state file may be behind its Temporal workflow: %v\n", err)
	}
	return doc
}
