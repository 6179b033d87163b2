package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/control"
)

type pauseOptions struct {
	IO     *streams
	Global *globalOptions
	Resume bool
	Kill   bool
	Reason string
	Wait   time.Duration
}

type pauseDoc struct {
	Success bool   `json:"success"`
	Paused  bool   `json:"paused"`
	Kill    bool   `json:"kill,omitempty"`
	Reason  string `json:"reason"`
}

func newCmdPause(d *deps, g *globalOptions, runF func(*pauseOptions) error) *cobra.Command {
	opts := &pauseOptions{IO: d.io, Global: g, Wait: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "pause [--kill] [--reason R]",
		Short: "Hold the running loop: nothing new starts until aot resume",
		Long: `Pause the running loop at atom granularity: no new agent starts. The agents
already running finish and their results count; with --kill they are killed
instead, their results discarded and their atoms back to pending. While
paused no bound advances and the paused time is not charged to
max_wall_time. aot stop still stops a paused loop at once; aot resume lets it
go on; a new aot run of a loop whose engine died while paused resumes it and
journals that.

Exit 1 when no engine runs the loop. JSON: {success, paused, kill, reason}.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return pauseRun(opts)
		}),
	}
	cmd.Flags().BoolVar(&opts.Kill, "kill", false, "kill the running agents instead of letting them finish")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the loop is paused (journaled)")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 10*time.Second, "how long to wait for the engine's answer")
	return cmd
}

func newCmdResume(d *deps, g *globalOptions, runF func(*pauseOptions) error) *cobra.Command {
	opts := &pauseOptions{IO: d.io, Global: g, Resume: true, Wait: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "resume [--reason R]",
		Short: "Let a paused loop go on",
		Long: `Resume a loop paused with aot pause: agents start again on the executable
atoms, and the stall window starts afresh.

Exit 1 when no engine runs the loop or it is not paused. JSON: {success, paused, reason}.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return pauseRun(opts)
		}),
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the loop goes on (journaled)")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 10*time.Second, "how long to wait for the engine's answer")
	return cmd
}

func pauseRun(opts *pauseOptions) error {
	if _, err := readState(opts.Global); err != nil {
		return err
	}
	reason := strings.TrimSpace(opts.Reason)
	if reason == "" {
		reason = "aot pause"
		if opts.Resume {
			reason = "aot resume"
		}
	}
	ctl, done := controllerFor(opts.Global, time.Now, askWorkflow)
	defer done()
	ctx, cancel := controlWait(ctl, opts.Wait, false)
	defer cancel()
	var err error
	if opts.Resume {
		err = ctl.Resume(ctx, reason)
	} else {
		err = ctl.Pause(ctx, opts.Kill, reason)
	}
	var rec *control.RecordedError
	if errors.As(err, &rec) {
		// The workflow keeps the signal and acts on it once a worker polls.
		fmt.Fprintf(opts.IO.ErrOut, "aot: %v\n", rec)
		err = nil
	}
	if err != nil {
		return err
	}
	doc := pauseDoc{Success: true, Paused: !opts.Resume, Kill: opts.Kill && !opts.Resume, Reason: reason}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, doc)
		return nil
	}
	switch {
	case opts.Resume:
		fmt.Fprintf(opts.IO.Out, "loop resumed (%s)\n", reason)
	case opts.Kill:
		fmt.Fprintf(opts.IO.Out, "loop paused, running agents killed (%s); aot resume lets it go on\n", reason)
	default:
		fmt.Fprintf(opts.IO.Out, "loop paused: running agents finish, nothing new starts (%s); aot resume lets it go on\n", reason)
	}
	return nil
}
