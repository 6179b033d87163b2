package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/state"
)

type stateOptions struct {
	IO     *streams
	Global *globalOptions
}

const stateLong = `Show the loop's control fields, the work graph and the bindings.

executable_atoms is the full set of atoms that could start now by the rules of
the work graph, not capped by max_parallel_agents: pending atoms whose
dependencies are resolved (an OR group counts as resolved when its selected
choice is), only the selected choice of an OR group, and never a decomposed
parent whose children are unresolved. A binding alone never resolves an atom.

JSON: {exists, status, iteration, stall_count, prev_pending_count,
stop_requested, redirect_requested, stop_reason, atoms: [{id, description,
status, depends_on, or_group?, failed?}], executable_atoms: [id], bindings:
{id: {summary, artifacts}}, summary: {total, pending, in_progress, resolved,
failed, executable}}. A missing or unreadable file gives {error, exists} and
exit 1.

A failed OR choice (in its group's failed list) keeps status pending in the
file, since it may be selected again, but is shown as failed: "failed" in the
table, failed: true in JSON, and counted as failed rather than pending.

A file that does not validate is still shown, with a warning on stderr
naming its first error and line (aot validate lists them all); commands that
change the state refuse it until it is repaired.`

func newCmdState(d *deps, g *globalOptions, runF func(*stateOptions) error) *cobra.Command {
	opts := &stateOptions{IO: d.io, Global: g}
	return &cobra.Command{
		Use:   "state",
		Short: "Show the state: control, atoms, executable atoms, bindings",
		Long:  stateLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return stateRun(opts)
		}),
	}
}

type stateAtomDoc struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Status      string   `json:"status"`
	DependsOn   []string `json:"depends_on"`
	ORGroup     string   `json:"or_group,omitempty"`
	// Failed marks an OR choice in its group's failed list: its status is
	// pending (it may be selected again), but it will not run.
	Failed bool `json:"failed,omitempty"`
}

// stateSummaryDoc counts atoms by status; a failed OR choice counts as
// failed, not pending, so that the counts add up to total.
type stateSummaryDoc struct {
	Total      int `json:"total"`
	Pending    int `json:"pending"`
	InProgress int `json:"in_progress"`
	Resolved   int `json:"resolved"`
	Failed     int `json:"failed"`
	Executable int `json:"executable"`
}

type stateDoc struct {
	Exists            bool            `json:"exists"`
	Status            string          `json:"status"`
	Iteration         int             `json:"iteration"`
	StallCount        int             `json:"stall_count"`
	PrevPendingCount  int             `json:"prev_pending_count"`
	StopRequested     bool            `json:"stop_requested"`
	RedirectRequested bool            `json:"redirect_requested"`
	StopReason        *string         `json:"stop_reason"`
	Atoms             []stateAtomDoc  `json:"atoms"`
	ExecutableAtoms   []string        `json:"executable_atoms"`
	Bindings          bindingsDoc     `json:"bindings"`
	Summary           stateSummaryDoc `json:"summary"`
}

// stateErrorDoc is read_state's error shape.
type stateErrorDoc struct {
	Error  string `json:"error"`
	Exists bool   `json:"exists"`
}

// bindingsDoc renders bindings as a JSON object in file order.
type bindingsDoc []state.Binding

func (b bindingsDoc) MarshalJSON() ([]byte, error) {
	buf := []byte{'{'}
	for i, x := range b {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, x.AtomID)
		buf = append(buf, `:{"summary":`...)
		buf = appendJSONString(buf, x.Summary)
		buf = append(buf, `,"artifacts":[`...)
		for k, a := range x.Artifacts {
			if k > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, a)
		}
		buf = append(buf, "]}"...)
	}
	return append(buf, '}'), nil
}

func stateRun(opts *stateOptions) error {
	s, err := readShown(opts.IO, opts.Global)
	if err != nil {
		if opts.Global.JSON {
			writeJSON(opts.IO.Out, stateErrorDoc{Error: sentence(err), Exists: !errors.Is(err, state.ErrNotExist)})
			return reported(exitFail)
		}
		return err
	}
	doc := newStateDoc(s)
	if opts.Global.JSON {
		return writeStateJSON(opts.IO.Out, doc)
	}
	printState(opts.IO, s, doc)
	return nil
}

func newStateDoc(s *state.State) stateDoc {
	doc := stateDoc{
		Exists:            true,
		Status:            s.Control.Status,
		Iteration:         s.Control.Iteration,
		StallCount:        s.Control.StallCount,
		PrevPendingCount:  s.Control.PrevPendingCount,
		StopRequested:     s.Control.StopRequested,
		RedirectRequested: s.Control.RedirectRequested,
		StopReason:        s.Control.StopReason,
		Atoms:             make([]stateAtomDoc, 0, len(s.Atoms)),
		ExecutableAtoms:   []string{},
		Bindings:          bindingsDoc(s.Bindings),
	}
	failed := map[string]bool{}
	for _, g := range s.ORGroups {
		for _, id := range g.Failed {
			failed[g.Name+"\x00"+id] = true
		}
	}
	for _, a := range s.Atoms {
		deps := a.DependsOn
		if deps == nil {
			deps = []string{}
		}
		ad := stateAtomDoc{ID: a.ID, Description: a.Description, Status: a.Status, DependsOn: deps, ORGroup: a.ORGroup}
		ad.Failed = a.ORGroup != "" && a.Status != state.StatusResolved && failed[a.ORGroup+"\x00"+a.ID]
		doc.Atoms = append(doc.Atoms, ad)
		switch {
		case ad.Failed:
			doc.Summary.Failed++
		case a.Status == state.StatusPending:
			doc.Summary.Pending++
		case a.Status == state.StatusInProgress:
			doc.Summary.InProgress++
		case a.Status == state.StatusResolved:
			doc.Summary.Resolved++
		}
	}
	for _, a := range dag.Executable(s, 0) {
		doc.ExecutableAtoms = append(doc.ExecutableAtoms, a.ID)
	}
	doc.Summary.Total = len(s.Atoms)
	doc.Summary.Executable = len(doc.ExecutableAtoms)
	return doc
}

func printState(io *streams, s *state.State, doc stateDoc) {
	sum := doc.Summary
	tw := io.table()
	fmt.Fprintf(tw, "Loop\t%s, iteration %d, stall %d/%d\n", io.status(doc.Status), doc.Iteration, doc.StallCount, s.Objective.Constraints.MaxStallCount)
	if doc.StopRequested || doc.StopReason != nil {
		reason := "-"
		if doc.StopReason != nil {
			reason = *doc.StopReason
		}
		fmt.Fprintf(tw, "Stop\trequested %t, reason: %s\n", doc.StopRequested, reason)
	}
	if doc.RedirectRequested {
		fmt.Fprintf(tw, "Redirect\trequested\n")
	}
	failed := ""
	if sum.Failed > 0 {
		failed = fmt.Sprintf(", %d failed", sum.Failed)
	}
	fmt.Fprintf(tw, "Atoms\t%d: %d pending, %d in progress, %d resolved%s\n", sum.Total, sum.Pending, sum.InProgress, sum.Resolved, failed)
	fmt.Fprintf(tw, "Executable\t%s\n", orDash(strings.Join(doc.ExecutableAtoms, ", ")))
	_ = tw.Flush()
	if len(s.Atoms) > 0 {
		fmt.Fprintln(io.Out)
		tw = io.table()
		fmt.Fprintf(tw, "ID\t%s\tDEPENDS ON\tOR GROUP\tDESCRIPTION\n", io.paint(styleDefault, "STATUS"))
		for _, a := range doc.Atoms {
			st := a.Status
			if a.Failed {
				st = "failed" // pending by the contract, but it will not run unless selected again
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, io.status(st), orDash(strings.Join(a.DependsOn, ",")), orDash(a.ORGroup), dag.OneLine(a.Description, 60))
		}
		_ = tw.Flush()
	}
	if len(s.Bindings) > 0 {
		fmt.Fprintln(io.Out)
		tw = io.table()
		fmt.Fprintln(tw, "BINDING\tARTIFACTS\tSUMMARY")
		for _, b := range s.Bindings {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", b.AtomID, len(b.Artifacts), dag.OneLine(b.Summary, 60))
		}
		_ = tw.Flush()
	}
}
