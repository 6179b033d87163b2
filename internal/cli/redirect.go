package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

type redirectOptions struct {
	IO     *streams
	Global *globalOptions
	Change engine.Change
	Wait   time.Duration
	now    func() time.Time
}

const redirectLong = `Correct the loop's direction. With a running engine, its agents are killed
and their results discarded, the change is applied, a correction is recorded
and the loop goes on in the new direction; without one, the change is
applied to the state file for the next aot run.

Kinds of change (any combination, --reason always required):
  objective:   --goal, --background, --deliverables, --done   (clears the trail)
  work graph:  --add-atom ID=DESC [--depends-on ID=A1,A2], --remove-atom ID,
               --select GROUP=CHOICE                          (appends to the trail)
  constraints: --max-iterations, --max-parallel, --max-stall, --max-wall-time,
               --max-cost, --max-tokens, --max-attempts        (nothing else changes)
  bindings:    --clear-binding ID   (only those atoms' results are dropped and redone)

JSON: {success, applied_by: engine|file, corrections: [type]}.`

func newCmdRedirect(d *deps, g *globalOptions, runF func(*redirectOptions) error) *cobra.Command {
	opts := &redirectOptions{IO: d.io, Global: g, now: d.now}
	var addAtoms, depends, selects []string
	var maxIter, maxPar, maxStall, maxAttempts int
	var wall string
	var maxCost float64
	var maxTokens int64
	cmd := &cobra.Command{
		Use:   "redirect --reason R [changes]",
		Short: "Change goal, work graph, constraints or bindings, even while the loop runs",
		Long:  redirectLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			c := &opts.Change
			if strings.TrimSpace(c.Reason) == "" {
				return usagef("--reason is required")
			}
			if len(addAtoms) > 0 {
				atoms, err := parseAtoms(addAtoms, depends)
				if err != nil {
					return err
				}
				c.AddAtoms = atoms
			} else if len(depends) > 0 {
				return usagef("--depends-on applies to --add-atom atoms only")
			}
			for _, sel := range selects {
				grp, choice, ok := strings.Cut(sel, "=")
				if !ok || strings.TrimSpace(grp) == "" || strings.TrimSpace(choice) == "" {
					return usagef("--select %q: want GROUP=CHOICE", sel)
				}
				c.Select = append(c.Select, engine.ORSelect{Group: strings.TrimSpace(grp), Choice: strings.TrimSpace(choice)})
			}
			fs := cmd.Flags()
			if flagChanged(fs, "max-iterations") {
				c.MaxIterations = &maxIter
			}
			if flagChanged(fs, "max-parallel") {
				c.MaxParallelAgents = &maxPar
			}
			if flagChanged(fs, "max-stall") {
				c.MaxStallCount = &maxStall
			}
			if flagChanged(fs, "max-attempts") {
				c.MaxAttemptsPerAtom = &maxAttempts
			}
			if flagChanged(fs, "max-wall-time") {
				if _, err := state.ParseDuration(wall); err != nil {
					return usagef("--max-wall-time: %v", err)
				}
				c.MaxWallTime = &wall
			}
			if flagChanged(fs, "max-cost") {
				c.MaxCostUSD = &maxCost
			}
			if flagChanged(fs, "max-tokens") {
				c.MaxTokens = &maxTokens
			}
			for _, n := range []int{maxIter, maxPar, maxStall, maxAttempts} {
				if n < 0 {
					return usagef("limits must not be negative")
				}
			}
			if c.Empty() {
				return usagef("%v", engine.ErrEmptyChange)
			}
			if runF != nil {
				return runF(opts)
			}
			return redirectRun(opts)
		}),
	}
	f := cmd.Flags()
	c := &opts.Change
	f.StringVar(&c.Reason, "reason", "", "why the direction changes (required; recorded in the correction)")
	f.StringVar(&c.Goal, "goal", "", "new goal")
	f.StringVar(&c.BackgroundIntent, "background", "", "new background intent")
	f.StringVar(&c.Deliverables, "deliverables", "", "new deliverables")
	f.StringVar(&c.DefinitionOfDone, "done", "", "new definition of done")
	f.StringArrayVar(&addAtoms, "add-atom", nil, "add an atom `ID=DESCRIPTION` (repeatable)")
	f.StringArrayVar(&depends, "depends-on", nil, "dependencies of an added atom as `ID=DEP1,DEP2`")
	f.StringArrayVar(&c.RemoveAtoms, "remove-atom", nil, "remove an atom `ID` (repeatable)")
	f.StringArrayVar(&selects, "select", nil, "force an OR choice `GROUP=CHOICE` (repeatable)")
	f.IntVar(&maxIter, "max-iterations", 0, "new max_iterations")
	f.IntVar(&maxPar, "max-parallel", 0, "new max_parallel_agents")
	f.IntVar(&maxStall, "max-stall", 0, "new max_stall_count")
	f.IntVar(&maxAttempts, "max-attempts", 0, "new max_attempts_per_atom")
	f.StringVar(&wall, "max-wall-time", "", "new max_wall_time")
	f.Float64Var(&maxCost, "max-cost", 0, "new max_cost_usd")
	f.Int64Var(&maxTokens, "max-tokens", 0, "new max_tokens")
	f.StringArrayVar(&c.ClearBindings, "clear-binding", nil, "drop the binding of atom `ID` and redo it (repeatable)")
	f.DurationVar(&opts.Wait, "wait", 15*time.Second, "how long to wait for a running engine to apply the change")
	return cmd
}

type redirectDoc struct {
	Success     bool     `json:"success"`
	AppliedBy   string   `json:"applied_by"`
	Corrections []string `json:"corrections"`
}

func redirectRun(opts *redirectOptions) error {
	ctl, done := controllerFor(opts.Global, opts.now, askWorkflow)
	defer done()
	ctx, cancel := controlWait(ctl, opts.Wait, false)
	defer cancel()
	res, err := ctl.Redirect(ctx, opts.Change)
	if err != nil {
		var ve *state.ValidationError
		if errors.As(err, &ve) {
			return err
		}
		return describeReadError(err)
	}
	doc := redirectDoc{Success: true, AppliedBy: res.AppliedBy, Corrections: res.Corrections}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, doc)
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "redirected (%s), applied by the %s\n", strings.Join(doc.Corrections, ", "), doc.AppliedBy)
	return nil
}
