package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/state"
)

type initOptions struct {
	IO               *streams
	Global           *globalOptions
	Goal             string
	Background       string
	Deliverables     string
	DefinitionOfDone string
	Checks           []state.ChecklistItem
	Atoms            []state.Atom
	ORGroups         []state.ORGroup
	Prompt           string
	Constraints      state.Constraints
	Force            bool
}

const initLong = `Write a new state file from flags: the objective, its base case as a
checklist, and the first atoms of the work graph. The result is validated
before anything is written; an existing file is only replaced with --force,
and only if it is a regular file (a directory, FIFO, socket or device at the
path is refused); what was replaced is said.

Checks (--check, repeatable) are TYPE:VALUE, with an optional item name as
NAME=TYPE:VALUE. Types: command (exit 0 passes), not_command (a normal
non-zero exit passes), file and not_file (paths or globs, ** allowed),
assertion and quality (judged by an LLM judge; VALUE is the criteria).

Timeouts: a command or not_command check that runs longer than its timeout
fails, its whole process group killed. The default is 60s (aot verify
--timeout changes it for one verification). --check-timeout NAME=DURATION
(repeatable) gives the check named NAME its own timeout: the check's timeout:
field in the file, which wins over any default. DURATION is whole seconds
(90) or a Go duration (10m, 1h30m). --check-timeout DURATION alone sets it
for every command check that has none of its own. A check without a NAME is
named after its value.

Atoms (--atom, repeatable) are ID=DESCRIPTION; an id is 1 to 64 letters,
digits, '.', '_' and '-', starting with a letter or a digit. Dependencies go
in --depends-on ID=DEP1,DEP2 (repeatable). --or-group GROUP=ID1,ID2
(repeatable) makes those atoms the alternative choices of OR group GROUP,
the first one selected: the others run only when it fails (aot or fail, or
the loop backtracking).

Example:
  aot init --goal "Add a /health endpoint" \
    --background "Load balancers need a liveness probe" \
    --deliverables "GET /health returning 200 and a test" \
    --done "go test ./... passes and the handler exists" \
    --check "tests=command:go test ./..." --check-timeout tests=10m \
    --check "file:internal/http/health.go" \
    --atom "A1=Write the handler" --atom "A2=Write the test" --depends-on A2=A1 \
    --atom "B1=Document it in the README" --atom "B2=Document it in docs/" \
    --or-group docs=B1,B2

JSON: {success, state_file, atoms: [id], replaced?: {path, bytes}}.`

func newCmdInit(d *deps, g *globalOptions, runF func(*initOptions) error) *cobra.Command {
	opts := &initOptions{IO: d.io, Global: g}
	var checks, atoms, depends, timeouts, groups []string
	var wall string
	cmd := &cobra.Command{
		Use:   "init --goal G --background B --deliverables D --done C --check [NAME=]TYPE:VALUE --atom ID=DESC",
		Short: "Write a new state file from flags",
		Long:  initLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			for _, f := range []struct{ flag, val string }{
				{"goal", opts.Goal}, {"background", opts.Background},
				{"deliverables", opts.Deliverables}, {"done", opts.DefinitionOfDone},
			} {
				if strings.TrimSpace(f.val) == "" {
					return usagef("--%s is required and must not be blank", f.flag)
				}
			}
			if len(checks) == 0 {
				return usagef("at least one --check TYPE:VALUE is required (the base case must be verifiable)")
			}
			if len(atoms) == 0 {
				return usagef("at least one --atom ID=DESCRIPTION is required")
			}
			var err error
			if opts.Checks, err = parseChecks(checks); err != nil {
				return err
			}
			if err = applyCheckTimeouts(opts.Checks, timeouts); err != nil {
				return err
			}
			if opts.Atoms, err = parseAtoms(atoms, depends); err != nil {
				return err
			}
			if opts.ORGroups, err = parseORGroups(groups, opts.Atoms); err != nil {
				return err
			}
			if wall != "" {
				if _, err := state.ParseDuration(wall); err != nil {
					return usagef("--max-wall-time: %v", err)
				}
				opts.Constraints.MaxWallTime = wall
			}
			for _, n := range []struct {
				flag string
				v    int
			}{
				{"max-iterations", opts.Constraints.MaxIterations},
				{"max-parallel", opts.Constraints.MaxParallelAgents},
				{"max-stall", opts.Constraints.MaxStallCount},
			} {
				if n.v < 0 {
					return usagef("--%s must not be negative", n.flag)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return initRun(opts)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.Goal, "goal", "", "what the loop must achieve (required)")
	f.StringVar(&opts.Background, "background", "", "why: the intent behind the goal (required)")
	f.StringVar(&opts.Deliverables, "deliverables", "", "what is delivered (required)")
	f.StringVar(&opts.DefinitionOfDone, "done", "", "the definition of done, in words (required)")
	f.StringArrayVar(&checks, "check", nil, "a base-case check `[NAME=]TYPE:VALUE` (repeatable, at least one)")
	f.StringArrayVar(&atoms, "atom", nil, "a first atom `ID=DESCRIPTION` (repeatable, at least one)")
	f.StringArrayVar(&depends, "depends-on", nil, "dependencies of an atom as `ID=DEP1,DEP2` (repeatable)")
	f.StringArrayVar(&timeouts, "check-timeout", nil, "a command check's timeout as `[NAME=]DURATION`, e.g. tests=10m (repeatable; default 60s)")
	f.StringArrayVar(&groups, "or-group", nil, "an OR group of alternative atoms as `GROUP=ID1,ID2`, the first selected (repeatable)")
	f.StringVar(&opts.Prompt, "prompt", "", "the original request, kept in the Markdown body (default: the goal)")
	f.IntVar(&opts.Constraints.MaxIterations, "max-iterations", state.DefaultMaxIterations, "iteration bound")
	f.IntVar(&opts.Constraints.MaxParallelAgents, "max-parallel", state.DefaultMaxParallelAgents, "agents at once")
	f.IntVar(&opts.Constraints.MaxStallCount, "max-stall", state.DefaultMaxStallCount, "iterations without progress before stopping")
	f.StringVar(&wall, "max-wall-time", "", "wall-clock bound, e.g. 2h (default: none)")
	f.Float64Var(&opts.Constraints.MaxCostUSD, "max-cost", 0, "cost bound in USD (default: none)")
	f.Int64Var(&opts.Constraints.MaxTokens, "max-tokens", 0, "token bound (default: none)")
	f.IntVar(&opts.Constraints.MaxAttemptsPerAtom, "max-attempts", 0, "failed attempts allowed per atom (default: none)")
	f.BoolVar(&opts.Force, "force", false, "replace an existing state file")
	return cmd
}

// defaultPassThreshold is the judge's bar for checks made by init: 3 on the
// contract's 1-5 scale.
const defaultPassThreshold = 3.0

var checkTypes = []string{state.CheckCommand, state.CheckNotCommand, state.CheckFile, state.CheckNotFile, state.CheckAssertion, state.CheckQuality}

// parseChecks reads --check values: [NAME=]TYPE:VALUE.
func parseChecks(list []string) ([]state.ChecklistItem, error) {
	out := make([]state.ChecklistItem, 0, len(list))
	for _, raw := range list {
		name, spec := "", raw
		// A name is only split off when what precedes "=" has no ":" (so a
		// command such as "command:FOO=1 make" keeps its "=").
		if i := strings.IndexByte(raw, '='); i > 0 && !strings.Contains(raw[:i], ":") {
			name, spec = strings.TrimSpace(raw[:i]), raw[i+1:]
		}
		typ, value, ok := strings.Cut(spec, ":")
		typ, value = strings.TrimSpace(typ), strings.TrimSpace(value)
		if !ok || value == "" {
			return nil, usagef("--check %q: want [NAME=]TYPE:VALUE with a non-empty value", raw)
		}
		known := false
		for _, t := range checkTypes {
			known = known || t == typ
		}
		if !known {
			return nil, usagef("--check %q: unknown type %q (choose from %s)", raw, typ, quotedList(checkTypes))
		}
		if name == "" {
			name = value
		}
		c := &state.Check{Type: typ, Value: value}
		if typ == state.CheckAssertion || typ == state.CheckQuality {
			c.Value, c.Criteria = "", value
			threshold := defaultPassThreshold
			c.PassThreshold = &threshold
		}
		out = append(out, state.ChecklistItem{Item: name, Check: c})
	}
	return out, nil
}

// parseAtoms reads --atom ID=DESCRIPTION and --depends-on ID=DEP1,DEP2.
func parseAtoms(list, depends []string) ([]state.Atom, error) {
	atoms := make([]state.Atom, 0, len(list))
	index := map[string]int{}
	for _, raw := range list {
		id, desc, ok := strings.Cut(raw, "=")
		id, desc = strings.TrimSpace(id), strings.TrimSpace(desc)
		if !ok || id == "" || desc == "" {
			return nil, usagef("--atom %q: want ID=DESCRIPTION with both parts non-empty", raw)
		}
		if err := state.ValidID(id); err != nil {
			return nil, usagef("--atom %q: %v", raw, err)
		}
		if _, dup := index[id]; dup {
			return nil, usagef("--atom: id %q is given twice", id)
		}
		index[id] = len(atoms)
		atoms = append(atoms, state.Atom{ID: id, Description: desc, Status: state.StatusPending, DependsOn: []string{}})
	}
	for _, raw := range depends {
		id, deps, ok := strings.Cut(raw, "=")
		id = strings.TrimSpace(id)
		i, known := index[id]
		if !ok || !known {
			return nil, usagef("--depends-on %q: want ID=DEP1,DEP2 where ID is an --atom", raw)
		}
		list, err := splitList("depends-on", deps)
		if err != nil {
			return nil, err
		}
		atoms[i].DependsOn = append(atoms[i].DependsOn, list...)
	}
	return atoms, nil
}

// applyCheckTimeouts reads --check-timeout [NAME=]DURATION: a named one
// sets that check's timeout (a name given twice, or naming no check, is a
// mistake); one without a name sets it for every command check still
// without one. Only command and not_command checks run with a timeout.
func applyCheckTimeouts(checks []state.ChecklistItem, list []string) error {
	var all string
	named := map[string]bool{}
	for _, raw := range list {
		name, value := "", strings.TrimSpace(raw)
		// The duration never holds "=", a name (a command) may.
		if i := strings.LastIndexByte(raw, '='); i >= 0 {
			name, value = strings.TrimSpace(raw[:i]), strings.TrimSpace(raw[i+1:])
		}
		if d, err := state.ParseDuration(value); err != nil || d <= 0 {
			return usagef("--check-timeout %q: want [NAME=]DURATION with DURATION whole seconds or a duration like 10m", raw)
		}
		if name == "" {
			all = value
			continue
		}
		if named[name] {
			return usagef("--check-timeout: check %q is given twice", name)
		}
		named[name] = true
		found := false
		for i := range checks {
			if checks[i].Item != name {
				continue
			}
			found = true
			if t := checks[i].Check.Type; t != state.CheckCommand && t != state.CheckNotCommand {
				return usagef("--check-timeout %q: check %q is a %s check; only command and not_command checks run with a timeout", raw, name, t)
			}
			checks[i].Check.Timeout = value
		}
		if !found {
			return usagef("--check-timeout %q: no --check is named %q (name one as NAME=TYPE:VALUE)", raw, name)
		}
	}
	if all != "" {
		for i := range checks {
			if c := checks[i].Check; (c.Type == state.CheckCommand || c.Type == state.CheckNotCommand) && c.Timeout == "" {
				c.Timeout = all
			}
		}
	}
	return nil
}

// parseORGroups reads --or-group GROUP=ID1,ID2: the atoms, each an --atom
// and in one group at most, become the group's choices, the first selected.
func parseORGroups(list []string, atoms []state.Atom) ([]state.ORGroup, error) {
	index := map[string]int{}
	for i, a := range atoms {
		index[a.ID] = i
	}
	var groups []state.ORGroup
	for _, raw := range list {
		name, ids, ok := strings.Cut(raw, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, usagef("--or-group %q: want GROUP=ID1,ID2", raw)
		}
		choices, err := splitList("or-group", ids)
		if err != nil {
			return nil, err
		}
		if len(choices) < 2 {
			return nil, usagef("--or-group %q: an OR group needs at least two alternative atoms", raw)
		}
		for _, g := range groups {
			if g.Name == name {
				return nil, usagef("--or-group: group %q is given twice", name)
			}
		}
		for _, id := range choices {
			i, known := index[id]
			switch {
			case !known:
				return nil, usagef("--or-group %q: %q is not an --atom", raw, id)
			case atoms[i].ORGroup != "":
				return nil, usagef("--or-group %q: atom %q is already a choice of OR group %q", raw, id, atoms[i].ORGroup)
			}
			atoms[i].ORGroup = name
		}
		groups = append(groups, state.ORGroup{Name: name, Choices: choices, Selected: choices[0], Failed: []string{}})
	}
	return groups, nil
}

type initDoc struct {
	Success   bool             `json:"success"`
	StateFile string           `json:"state_file"`
	Atoms     []string         `json:"atoms"`
	Replaced  *initReplacedDoc `json:"replaced,omitempty"`
}

// initReplacedDoc is the regular file --force replaced.
type initReplacedDoc struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

func initRun(opts *initOptions) error {
	prompt := opts.Prompt
	if strings.TrimSpace(prompt) == "" {
		prompt = opts.Goal
	}
	obj := state.Objective{
		Goal:             opts.Goal,
		BackgroundIntent: opts.Background,
		Deliverables:     opts.Deliverables,
		DefinitionOfDone: opts.DefinitionOfDone,
		BaseCase:         &state.BaseCase{Checklist: opts.Checks, HasChecklist: true},
		Constraints:      opts.Constraints,
	}
	s := state.New(obj, opts.Atoms, prompt)
	s.ORGroups = append(s.ORGroups, opts.ORGroups...)
	replaced, err := opts.Global.store().CreateReplacing(s, opts.Force)
	if err != nil {
		if _, special := errors.AsType[*state.PathError](err); special && opts.Force {
			return fmt.Errorf("%w; --force replaces only a regular file", err)
		}
		return err
	}
	ids := make([]string, 0, len(opts.Atoms))
	for _, a := range opts.Atoms {
		ids = append(ids, a.ID)
	}
	path := opts.Global.StateFile
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	doc := initDoc{Success: true, StateFile: path, Atoms: ids}
	if replaced != nil {
		doc.Replaced = &initReplacedDoc{Path: replaced.Path, Bytes: replaced.Size}
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, doc)
		return nil
	}
	if replaced != nil {
		fmt.Fprintf(opts.IO.Out, "replaced %s (a regular file of %d bytes)\n", replaced.Path, replaced.Size)
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s: %s, %s\n", opts.Global.StateFile, brief.Count(len(opts.Checks), "check"), brief.Count(len(ids), "atom"))
	fmt.Fprintf(opts.IO.Out, "next: aot gate%s\n", stateFileFlag(opts.Global.StateFile))
	return nil
}

// stateFileFlag repeats --state-file in a suggested command when it is not the default.
func stateFileFlag(path string) string {
	if path == state.DefaultPath {
		return ""
	}
	return " --state-file " + path
}
