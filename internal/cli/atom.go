package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/hooks"
	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
)

func newCmdAtom(d *deps, g *globalOptions) *cobra.Command {
	cmd := newGroupCmd("atom", "Change atoms of the work graph: set, add, decompose")
	cmd.AddCommand(
		newCmdAtomSet(d, g, nil),
		newCmdAtomAdd(d, g, nil),
		newCmdAtomDecompose(d, g, nil),
	)
	return cmd
}

// update applies fn to the state file under the store's lock. A refused
// change leaves the file byte-identical.
func update(g *globalOptions, fn func(*state.State) error) (*state.State, error) {
	if pid, held, err := runlock.Holder(g.StateFile); err == nil && held {
		return nil, fmt.Errorf("the loop is running (engine pid %d) and would overwrite this change: use aot stop, or aot redirect to change it while it runs", pid)
	}
	s, err := g.store().Update(fn)
	if err != nil {
		return nil, g.describe(err)
	}
	return s, nil
}

// splitList splits a comma-separated flag value, trimming blanks and
// refusing empty entries (a trailing comma is a mistake, not an empty id).
func splitList(flag, v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return []string{}, nil
	}
	parts := strings.Split(v, ",")
	out := make([]string, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, usagef("--%s: entry %d of %q is empty", flag, i+1, v)
		}
		out = append(out, p)
	}
	return out, nil
}

// --- aot atom set ---

type atomSetOptions struct {
	IO     *streams
	Global *globalOptions
	ID     string
	Status string
	getenv func(string) string
	now    func() time.Time
}

var atomStatuses = []string{state.StatusPending, state.StatusInProgress, state.StatusResolved}

func newCmdAtomSet(d *deps, g *globalOptions, runF func(*atomSetOptions) error) *cobra.Command {
	opts := &atomSetOptions{IO: d.io, Global: g, getenv: d.getenv, now: d.now}
	return &cobra.Command{
		Use:   "set ID STATUS",
		Short: "Set an atom's status (pending, in_progress, resolved)",
		Long: `Set the status of atom ID. Legal changes: pending -> in_progress ->
resolved, and any status back to pending. pending -> resolved is refused: an
atom is resolved by finishing work on it (only a decomposed parent resolves
directly, automatically, when all its children are resolved). in_progress and
resolved are refused while a dependency is not resolved (a dependency on an
OR choice waits for the group's selected choice); the message names it.

JSON: {success, atom_id, status}.`,
		Args: chainArgs(exactArgs("ID", "STATUS"), oneOfArg(1, "status", atomStatuses...)),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.ID, opts.Status = args[0], args[1]
			if runF != nil {
				return runF(opts)
			}
			return atomSetRun(opts)
		}),
	}
}

type atomSetDoc struct {
	Success bool   `json:"success"`
	AtomID  string `json:"atom_id"`
	Status  string `json:"status"`
}

func atomSetRun(opts *atomSetOptions) error {
	from := ""
	_, err := update(opts.Global, func(s *state.State) error {
		if a := s.Atom(opts.ID); a != nil {
			from = a.Status
		}
		return dag.SetStatus(s, opts.ID, opts.Status)
	})
	if err != nil {
		return err
	}
	if opts.getenv != nil {
		if o := hooks.CallerOwner(opts.Global.StateFile, opts.getenv); o != nil {
			if err := sessionAtom(opts.Global.StateFile, o, opts.ID, from, opts.Status, opts.now()); err != nil {
				fmt.Fprintf(opts.IO.ErrOut, "aot: warning: the session's work on %s could not be journaled: %v\n", opts.ID, err)
			}
		}
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, atomSetDoc{Success: true, AtomID: opts.ID, Status: opts.Status})
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "%s is now %s\n", opts.ID, opts.IO.status(opts.Status))
	return nil
}

// --- aot atom add ---

type atomAddOptions struct {
	IO          *streams
	Global      *globalOptions
	ID          string
	Description string
	DependsOn   []string
	ORGroup     string
}

func newCmdAtomAdd(d *deps, g *globalOptions, runF func(*atomAddOptions) error) *cobra.Command {
	opts := &atomAddOptions{IO: d.io, Global: g}
	var deps string
	cmd := &cobra.Command{
		Use:   "add ID --description D [--depends-on A1,A2] [--or-group G]",
		Short: "Add a pending atom to the work graph",
		Long: `Add a new pending atom. The id must be new and 1 to 64 letters, digits,
'.', '_' and '-', starting with a letter or a digit; every dependency must
exist, and the new edges must not close a cycle. With --or-group the atom joins that
OR group as another choice (a new group is created with it selected).

JSON: {success, atom_id, depends_on, or_group?}.`,
		Args: exactArgs("ID"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if err := state.ValidID(opts.ID); err != nil {
				return usagef("%v", err)
			}
			if strings.TrimSpace(opts.Description) == "" {
				return usagef("--description is required and must not be blank")
			}
			list, err := splitList("depends-on", deps)
			if err != nil {
				return err
			}
			opts.DependsOn = list
			if runF != nil {
				return runF(opts)
			}
			return atomAddRun(opts)
		}),
	}
	cmd.Flags().StringVar(&opts.Description, "description", "", "what the atom must achieve (required)")
	cmd.Flags().StringVar(&deps, "depends-on", "", "comma-separated `ids` the atom depends on")
	cmd.Flags().StringVar(&opts.ORGroup, "or-group", "", "OR group `name` the atom is a choice of")
	return cmd
}

type atomAddDoc struct {
	Success   bool     `json:"success"`
	AtomID    string   `json:"atom_id"`
	DependsOn []string `json:"depends_on"`
	ORGroup   string   `json:"or_group,omitempty"`
}

func atomAddRun(opts *atomAddOptions) error {
	a := state.Atom{ID: opts.ID, Description: opts.Description, Status: state.StatusPending, DependsOn: opts.DependsOn, ORGroup: opts.ORGroup}
	if _, err := update(opts.Global, func(s *state.State) error { return dag.AddAtom(s, a) }); err != nil {
		return err
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, atomAddDoc{Success: true, AtomID: a.ID, DependsOn: a.DependsOn, ORGroup: a.ORGroup})
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "added %s (depends on %s)\n", a.ID, orDash(strings.Join(a.DependsOn, ", ")))
	return nil
}

// --- aot atom decompose ---

type atomDecomposeOptions struct {
	IO       *streams
	Global   *globalOptions
	Parent   string
	Children []state.Atom
	Reason   string
}

func newCmdAtomDecompose(d *deps, g *globalOptions, runF func(*atomDecomposeOptions) error) *cobra.Command {
	opts := &atomDecomposeOptions{IO: d.io, Global: g}
	var children []string
	cmd := &cobra.Command{
		Use:   "decompose PARENT --child ID=DESCRIPTION ... --reason R",
		Short: "Split an atom into child atoms",
		Long: `Split PARENT into children. Each --child ID=DESCRIPTION adds one pending
child that inherits the parent's dependencies. The parent stays pending and is
not executable until every child is resolved; then it resolves automatically
with a binding that names its children and carries their artifacts.

JSON: {success, parent, children, inherited_deps}.`,
		Args: exactArgs("PARENT"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.Parent = args[0]
			if len(children) == 0 {
				return usagef("at least one --child ID=DESCRIPTION is required")
			}
			if strings.TrimSpace(opts.Reason) == "" {
				return usagef("--reason is required and must not be blank")
			}
			seen := map[string]bool{}
			opts.Children = opts.Children[:0]
			for _, c := range children {
				id, desc, ok := strings.Cut(c, "=")
				id, desc = strings.TrimSpace(id), strings.TrimSpace(desc)
				if !ok || id == "" || desc == "" {
					return usagef("--child %q: want ID=DESCRIPTION with both parts non-empty", c)
				}
				if err := state.ValidID(id); err != nil {
					return usagef("--child %q: %v", c, err)
				}
				if seen[id] {
					return usagef("--child: id %q is given twice", id)
				}
				seen[id] = true
				opts.Children = append(opts.Children, state.Atom{ID: id, Description: desc, Status: state.StatusPending})
			}
			if runF != nil {
				return runF(opts)
			}
			return atomDecomposeRun(opts)
		}),
	}
	cmd.Flags().StringArrayVar(&children, "child", nil, "a child as `ID=DESCRIPTION` (repeat for each child)")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the atom is split (required)")
	return cmd
}

type atomDecomposeDoc struct {
	Success       bool     `json:"success"`
	Parent        string   `json:"parent"`
	Children      []string `json:"children"`
	InheritedDeps []string `json:"inherited_deps"`
}

func atomDecomposeRun(opts *atomDecomposeOptions) error {
	var inherited []string
	_, err := update(opts.Global, func(s *state.State) error {
		var err error
		inherited, err = dag.Decompose(s, opts.Parent, opts.Children, opts.Reason)
		return err
	})
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(opts.Children))
	for _, c := range opts.Children {
		ids = append(ids, c.ID)
	}
	if inherited == nil {
		inherited = []string{}
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, atomDecomposeDoc{Success: true, Parent: opts.Parent, Children: ids, InheritedDeps: inherited})
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "decomposed %s into %s (inherited dependencies: %s)\n", opts.Parent, strings.Join(ids, ", "), orDash(strings.Join(inherited, ", ")))
	return nil
}
