package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/control"
)

// controllerFor chooses the controls of g's loop once (control.For): the
// Temporal side (serve_temporal*.go) is opened for a loop with the marker
// aot run --engine temporal leaves, and asked within ask. done closes it.
func controllerFor(g *globalOptions, now func() time.Time, ask time.Duration) (c control.Controller, done func()) {
	if !onTemporalLoop(g.StateFile) {
		return control.For(context.Background(), g.StateFile, nil, now), func() {}
	}
	w := openWorkflows()
	ctx, cancel := context.WithTimeout(context.Background(), ask)
	defer cancel()
	return control.For(ctx, g.StateFile, w, now), func() { _ = w.Close() }
}

// askWorkflow bounds For's question to a workflow: one that has workers
// answers in milliseconds.
const askWorkflow = 30 * time.Second

// controlWait is how long a command waits for the engine to act: wait (its
// --wait) for the local engine, at least stopWorkflow for a workflow's stop.
func controlWait(c control.Controller, wait time.Duration, stop bool) (context.Context, context.CancelFunc) {
	if stop && c.Kind() == control.Temporal {
		wait = max(wait, stopWorkflow)
	}
	return context.WithTimeout(context.Background(), wait)
}

// stopWorkflow bounds aot stop of a loop on Temporal: aot-temporal waits
// up to 45s for the workflow to close, then says why it has not.
const stopWorkflow = 60 * time.Second

// workflowStopped says what aot stop of a loop on Temporal did: its
// workflow has closed.
func workflowStopped(opts *stopOptions, res control.StopResult) error {
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, stopDoc{Success: true, Status: res.Status, Reason: res.Reason})
		return nil
	}
	ended := "Temporal says " + res.Workflow.Status
	if res.Workflow.Outcome != "" {
		ended = res.Workflow.Outcome
	}
	fmt.Fprintf(opts.IO.Out, "the workflow has closed (%s): its running attempts are stopped; aot run --engine temporal resumes the loop\n", ended)
	return nil
}

// syncWorkflow brings the state file of a loop on Temporal in step with
// its workflow before aot status shows it, and says what the workflow
// answered (nil when it could not be asked: the file may then be behind,
// and aot status says so on stderr).
func syncWorkflow(opts *statusOptions) *workflowDoc {
	ctl, done := controllerFor(opts.Global, time.Now, askWorkflow)
	defer done()
	st, err := ctl.Status(context.Background())
	var nw *control.NoWorkerError
	var n interface{ Notice() string }
	switch {
	case errors.As(err, &nw):
		fmt.Fprintf(opts.IO.ErrOut, "aot: %v: shown is the state file as last projected\n", nw)
	case st.Workflow != nil && errors.As(err, &n):
		fmt.Fprintf(opts.IO.ErrOut, "aot: %v\n", err)
	case err != nil:
		fmt.Fprintf(opts.IO.ErrOut, "aot: the state file may be behind its Temporal workflow: %v\n", err)
	}
	return st.Workflow
}

// newCmdWorkflowCall is aot-temporal workflow-call, the other end of the
// hand-over (workflowCallRun): not for people, so hidden.
func newCmdWorkflowCall(d *deps, g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:                "workflow-call",
		Short:              "Answer one call of plain aot to a loop's Temporal workflow: JSON on stdin and stdout (aot-temporal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return workflowCallRun(cmd.Context(), d)
		}),
	}
}
