package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/hooks"
	"github.com/aot-loop/aot/internal/state"
)

// --- aot bind ---

type bindOptions struct {
	IO        *streams
	Global    *globalOptions
	ID        string
	Summary   string
	Artifacts []string
}

func newCmdBind(d *deps, g *globalOptions, runF func(*bindOptions) error) *cobra.Command {
	opts := &bindOptions{IO: d.io, Global: g}
	var artifacts string
	cmd := &cobra.Command{
		Use:   "bind ID --summary S [--artifacts a,b]",
		Short: "Record the contracted result (binding) of an atom",
		Long: `Add or replace the binding of atom ID: a short summary of its result and
the files it produced. The atom must exist. A binding does not change the
atom's status (use "aot atom set ID resolved").

JSON: {success, atom_id, artifacts_count}.`,
		Args: exactArgs("ID"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if strings.TrimSpace(opts.Summary) == "" {
				return usagef("--summary is required and must not be blank")
			}
			list, err := splitList("artifacts", artifacts)
			if err != nil {
				return err
			}
			opts.Artifacts = list
			if runF != nil {
				return runF(opts)
			}
			return bindRun(opts)
		}),
	}
	cmd.Flags().StringVar(&opts.Summary, "summary", "", "short summary of the atom's result (required)")
	cmd.Flags().StringVar(&artifacts, "artifacts", "", "comma-separated `paths` the atom produced")
	return cmd
}

type bindDoc struct {
	Success        bool   `json:"success"`
	AtomID         string `json:"atom_id"`
	ArtifactsCount int    `json:"artifacts_count"`
}

func bindRun(opts *bindOptions) error {
	_, err := update(opts.Global, func(s *state.State) error {
		return dag.Bind(s, opts.ID, opts.Summary, opts.Artifacts)
	})
	if err != nil {
		return err
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, bindDoc{Success: true, AtomID: opts.ID, ArtifactsCount: len(opts.Artifacts)})
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "bound %s (%d artifacts)\n", opts.ID, len(opts.Artifacts))
	return nil
}

// --- aot or ---

func newCmdOr(d *deps, g *globalOptions) *cobra.Command {
	cmd := newGroupCmd("or", "Change OR groups: switch the selected choice, fail a choice")
	cmd.AddCommand(newCmdOrSwitch(d, g, nil), newCmdOrFail(d, g, nil))
	return cmd
}

type orSwitchOptions struct {
	IO     *streams
	Global *globalOptions
	Group  string
	Choice string
	Reason string
}

func newCmdOrSwitch(d *deps, g *globalOptions, runF func(*orSwitchOptions) error) *cobra.Command {
	opts := &orSwitchOptions{IO: d.io, Global: g}
	cmd := &cobra.Command{
		Use:   "switch GROUP CHOICE --reason R",
		Short: "Select another choice of an OR group",
		Long: `Make CHOICE the selected alternative of OR group GROUP and append a trail
entry with the reason and the time. The group and the choice must exist.

JSON: {success, or_group, selected, reason}.`,
		Args: exactArgs("GROUP", "CHOICE"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.Group, opts.Choice = args[0], args[1]
			if strings.TrimSpace(opts.Reason) == "" {
				return usagef("--reason is required and must not be blank")
			}
			if runF != nil {
				return runF(opts)
			}
			return orSwitchRun(d, opts)
		}),
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the selection changes (required)")
	return cmd
}

type orSwitchDoc struct {
	Success  bool   `json:"success"`
	ORGroup  string `json:"or_group"`
	Selected string `json:"selected"`
	Reason   string `json:"reason"`
}

func orSwitchRun(d *deps, opts *orSwitchOptions) error {
	_, err := update(opts.Global, func(s *state.State) error {
		return dag.SwitchOR(s, opts.Group, opts.Choice, opts.Reason, d.now())
	})
	if err != nil {
		return err
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, orSwitchDoc{Success: true, ORGroup: opts.Group, Selected: opts.Choice, Reason: opts.Reason})
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "OR group %s: selected %s\n", opts.Group, opts.Choice)
	return nil
}

type orFailOptions struct {
	IO     *streams
	Global *globalOptions
	Atom   string
	Reason string
}

func newCmdOrFail(d *deps, g *globalOptions, runF func(*orFailOptions) error) *cobra.Command {
	opts := &orFailOptions{IO: d.io, Global: g}
	cmd := &cobra.Command{
		Use:   "fail ATOM [--reason R]",
		Short: "Mark an OR choice as failed and backtrack to the next one",
		Long: `Record that ATOM, a choice of an OR group, failed: it joins the group's
failed list, its binding is removed, it returns to pending, and the next
choice that has not failed is selected (with a trail entry). When every choice
has failed the group is exhausted: the loop is stopped with the reason
"OR group exhausted: GROUP" and exhausted is true.

JSON: {success, or_group, failed, selected, exhausted}.`,
		Args: exactArgs("ATOM"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.Atom = args[0]
			if runF != nil {
				return runF(opts)
			}
			return orFailRun(d, opts)
		}),
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the choice failed")
	return cmd
}

type orFailDoc struct {
	Success   bool   `json:"success"`
	ORGroup   string `json:"or_group"`
	Failed    string `json:"failed"`
	Selected  string `json:"selected"`
	Exhausted bool   `json:"exhausted"`
}

func orFailRun(d *deps, opts *orFailOptions) error {
	reason := opts.Reason
	if strings.TrimSpace(reason) == "" {
		reason = "choice " + opts.Atom + " failed"
	}
	var res dag.FailResult
	_, err := update(opts.Global, func(s *state.State) error {
		var err error
		res, err = dag.FailOR(s, opts.Atom, reason, d.now())
		return err
	})
	if err != nil {
		return err
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, orFailDoc{Success: true, ORGroup: res.Group, Failed: res.Failed, Selected: res.Selected, Exhausted: res.Exhausted})
		return nil
	}
	if res.Exhausted {
		fmt.Fprintf(opts.IO.Out, "OR group %s: %s failed; every choice has failed, the loop is %s\n", res.Group, res.Failed, opts.IO.status(state.ControlStopped))
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "OR group %s: %s failed, selected %s\n", res.Group, res.Failed, res.Selected)
	return nil
}

// --- aot control ---

func newCmdControl(d *deps, g *globalOptions) *cobra.Command {
	cmd := newGroupCmd("control", "Change the loop's control fields")
	cmd.AddCommand(newCmdControlStatus(d, g, nil))
	return cmd
}

type controlStatusOptions struct {
	IO        *streams
	Global    *globalOptions
	getenv    func(string) string
	now       func() time.Time
	Status    string
	Reason    string
	HasReason bool
}

var controlStatuses = []string{state.ControlPending, state.ControlRunning, state.ControlStopped, state.ControlCompleted}

func newCmdControlStatus(d *deps, g *globalOptions, runF func(*controlStatusOptions) error) *cobra.Command {
	opts := &controlStatusOptions{IO: d.io, Global: g, getenv: d.getenv, now: d.now}
	cmd := &cobra.Command{
		Use:   "status STATUS [--reason R]",
		Short: "Set control.status (pending, running, stopped, completed)",
		Long: `Set the loop's control.status. Legal changes: pending -> running or
stopped; running -> stopped or completed; stopped -> running (resume) or
completed; completed -> running (a new round of work). --reason sets
control.stop_reason; setting running clears an old stop_reason and
stop_requested unless --reason is given.

Run from a Claude Code session's shell tool (CLAUDE_CODE_SESSION_ID set),
setting running makes that session the loop's owner: aot hook drives only
that session through the atoms (in-session mode; see aot help hook).

JSON: {success, status, reason?}.`,
		Args: chainArgs(exactArgs("STATUS"), oneOfArg(0, "status", controlStatuses...)),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.Status = args[0]
			opts.HasReason = flagChanged(cmd.Flags(), "reason")
			if opts.HasReason && strings.TrimSpace(opts.Reason) == "" {
				return usagef("--reason must not be blank")
			}
			if runF != nil {
				return runF(opts)
			}
			return controlStatusRun(opts)
		}),
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "the stop reason to record")
	return cmd
}

type controlStatusDoc struct {
	Success bool    `json:"success"`
	Status  string  `json:"status"`
	Reason  *string `json:"reason,omitempty"`
}

func controlStatusRun(opts *controlStatusOptions) error {
	_, err := update(opts.Global, func(s *state.State) error {
		s.Control.Status = opts.Status
		switch {
		case opts.HasReason:
			r := opts.Reason
			s.Control.StopReason = &r
		case opts.Status == state.ControlRunning:
			s.Control.StopReason = nil
			s.Control.StopRequested = false
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch opts.Status {
	case state.ControlRunning:
		if opts.getenv != nil {
			if owned, err := hooks.RecordOwner(opts.Global.StateFile, opts.getenv, opts.now()); err != nil {
				fmt.Fprintf(opts.IO.ErrOut, "aot: warning: the session could not be recorded as the loop's owner: %v\n", err)
			} else if owned {
				if o := hooks.CallerOwner(opts.Global.StateFile, opts.getenv); o != nil {
					if err := sessionStarted(opts.Global.StateFile, o, opts.now()); err != nil {
						fmt.Fprintf(opts.IO.ErrOut, "aot: warning: the session's start could not be journaled: %v\n", err)
					}
				}
				if !opts.Global.JSON {
					fmt.Fprintln(opts.IO.Out, "this session owns the loop: its stop hook continues it")
				}
			}
		}
	case state.ControlStopped, state.ControlCompleted:
		_ = hooks.ReleaseOwner(opts.Global.StateFile)
	}
	doc := controlStatusDoc{Success: true, Status: opts.Status}
	if opts.HasReason {
		doc.Reason = &opts.Reason
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, doc)
		return nil
	}
	if opts.HasReason {
		fmt.Fprintf(opts.IO.Out, "loop is now %s (reason: %s)\n", opts.IO.status(opts.Status), opts.Reason)
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "loop is now %s\n", opts.IO.status(opts.Status))
	return nil
}
