//go:build temporal

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/durable"
	"github.com/aot-loop/aot/internal/engine"
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
		Address: os.Getenv("TEMPORAL_ADDRESS"), Namespace: os.Getenv("TEMPORAL_NAMESPACE"),
	}
	m, attached, err := durable.Start(ctx, c, so)
	if err != nil {
		return err
	}
	say := func(s string) {
		if !opts.Quiet {
			fmt.Fprintf(opts.IO.ErrOut, "[temporal] %s\n", s)
		}
	}
	if attached {
		say(fmt.Sprintf("reattached to workflow %s (running since %s)", m.WorkflowID, m.Started.Format(time.RFC3339)))
	} else {
		say(fmt.Sprintf("started workflow %s on task queue %s; integration branch %s on %s", m.WorkflowID, m.TaskQueue, m.Base, m.Repo))
	}
	out, err := durable.Attach(ctx, c, m, opts.Global.StateFile, 500*time.Millisecond, say)
	if err != nil {
		return err
	}
	if out == nil {
		fmt.Fprintf(opts.IO.Out, "detached: the loop goes on as workflow %s; aot run --engine temporal reattaches, aot stop stops it\n", m.WorkflowID)
		return nil
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
		fmt.Fprintf(opts.IO.Out, "the merged work is on branch %s of %s: git fetch %s %s && git merge FETCH_HEAD takes it\n", m.Base, m.Repo, opts.Remote, m.Base)
	}
	if out.ExitCode != 0 {
		return reported(out.ExitCode)
	}
	return nil
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

// onTemporal runs fn with a client when stateFile's loop runs on Temporal;
// handled is false when it does not.
func onTemporal(stateFile string, fn func(ctx context.Context, c client.Client, m durable.Marker) error) (handled bool, err error) {
	m, ok := durable.ReadMarker(stateFile)
	if !ok {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := durable.Dial(ctx)
	if err != nil {
		return true, fmt.Errorf("the loop runs on Temporal (workflow %s): %w", m.WorkflowID, err)
	}
	defer c.Close()
	if err := fn(ctx, c, m); err != nil {
		var re *engine.RefusedError
		if errors.As(err, &re) {
			return true, err
		}
		return true, fmt.Errorf("workflow %s: %w", m.WorkflowID, err)
	}
	return true, nil
}

func temporalStop(opts *stopOptions) error {
	_, err := onTemporal(opts.Global.StateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		return durable.Cancel(ctx, c, m, opts.Reason)
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(opts.IO.Out, "the workflow is cancelled: its running attempts are stopped; aot run --engine temporal shows the end")
	return nil
}

func temporalPause(opts *pauseOptions, reason string) error {
	_, err := onTemporal(opts.Global.StateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		if opts.Resume {
			return durable.Signal(ctx, c, m, durable.SignalResume, durable.ResumeRequest{Reason: reason})
		}
		return durable.Signal(ctx, c, m, durable.SignalPause, durable.PauseRequest{Kill: opts.Kill, Reason: reason})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "signal sent to the loop's workflow (resume: %v)\n", opts.Resume)
	return nil
}

func temporalRedirect(opts *redirectOptions) error {
	_, err := onTemporal(opts.Global.StateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		return durable.Redirect(ctx, c, m, opts.Change)
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(opts.IO.Out, "redirected, applied by the loop's workflow")
	return nil
}

// temporalSync brings the state file in step with the workflow (it may be
// behind while no aot run is attached): the workflow is the truth.
func temporalSync(opts *statusOptions) {
	_, err := onTemporal(opts.Global.StateFile, func(ctx context.Context, c client.Client, m durable.Marker) error {
		st, err := durable.Query(ctx, c, m)
		if err != nil {
			return err
		}
		return durable.Project(opts.Global.StateFile, st)
	})
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "aot: the state file may be behind its Temporal workflow: %v\n", err)
	}
}
