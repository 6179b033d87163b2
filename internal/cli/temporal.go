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
// running on Temporal (its marker is beside the journal).

const (
	engineLocal    = "local"
	engineTemporal = "temporal"
)

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
