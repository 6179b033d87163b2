package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/state"
)

type validateOptions struct {
	IO     *streams
	Global *globalOptions
}

func newCmdValidate(d *deps, g *globalOptions, runF func(*validateOptions) error) *cobra.Command {
	opts := &validateOptions{IO: d.io, Global: g}
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the state file against the contract",
		Long: `Check the state file against the State Contract: YAML syntax, required
sections and fields, enums, unique ids, known dependencies, dependency cycles
(each reported with its path), OR groups, decompositions and bindings.

Exit 0 when there are no errors (warnings allowed), 1 otherwise.
JSON: {valid, errors: [..], warnings: [..], atom_count}; atom_count is left
out when the file is missing or cannot be parsed.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return validateRun(opts)
		}),
	}
}

type validateDoc struct {
	Valid     bool     `json:"valid"`
	Errors    []string `json:"errors"`
	Warnings  []string `json:"warnings"`
	AtomCount *int     `json:"atom_count,omitempty"`
}

func validateRun(opts *validateOptions) error {
	doc := validateDoc{Errors: []string{}, Warnings: []string{}}
	// The quick reader gives the state and the report a full read and
	// Validate give (state.TestReadReportIsReadAndValidate), in a fraction
	// of the time.
	s, r, err := opts.Global.store().ReadReport()
	if err != nil {
		doc.Errors = append(doc.Errors, sentence(opts.Global.describe(err)))
	} else {
		doc.Errors = append(doc.Errors, issueStrings(r.Errors)...)
		doc.Warnings = append(doc.Warnings, issueStrings(r.Warnings)...)
		n := len(s.Atoms)
		doc.AtomCount = &n
	}
	doc.Valid = len(doc.Errors) == 0
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, doc)
	} else {
		printValidate(opts.IO, opts.Global.StateFile, doc)
	}
	if !doc.Valid {
		return reported(exitFail)
	}
	return nil
}

func printValidate(io *streams, path string, doc validateDoc) {
	for _, e := range doc.Errors {
		fmt.Fprintf(io.Out, "%s %s\n", io.paint(styleRed, "error:"), e)
	}
	for _, w := range doc.Warnings {
		fmt.Fprintf(io.Out, "%s %s\n", io.paint(styleYellow, "warning:"), w)
	}
	if doc.Valid {
		fmt.Fprintf(io.Out, "%s: %s (%s, %s)\n", path, io.status("valid"), brief.Count(*doc.AtomCount, "atom"), brief.Count(len(doc.Warnings), "warning"))
		return
	}
	fmt.Fprintf(io.Out, "%s: %s (%s, %s)\n", path, io.status("invalid"), brief.Count(len(doc.Errors), "error"), brief.Count(len(doc.Warnings), "warning"))
}

type gateOptions struct {
	IO     *streams
	Global *globalOptions
}

func newCmdGate(d *deps, g *globalOptions, runF func(*gateOptions) error) *cobra.Command {
	opts := &gateOptions{IO: d.io, Global: g}
	return &cobra.Command{
		Use:   "gate",
		Short: "Check that the state is ready for the loop to start",
		Long: `Check that the loop may start: the state file parses and validates;
objective.goal, background_intent, deliverables and definition_of_done are
non-empty (blank text does not count); the base case is present (a legacy
check, or a checklist with at least one item); the work graph has at least one
atom; and control.status is pending or stopped.

Exit 0 when ready, 1 when not. JSON: {ready, missing: [sentence], status};
status is null when the file cannot be read.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return gateRun(opts)
		}),
	}
}

type gateDoc struct {
	Ready   bool     `json:"ready"`
	Missing []string `json:"missing"`
	Status  *string  `json:"status"`
}

func gateRun(opts *gateOptions) error {
	doc := gateDoc{Missing: []string{}}
	s, _, err := opts.Global.store().ReadReport()
	if err != nil {
		err = opts.Global.describe(err)
	}
	switch {
	case errors.Is(err, state.ErrNotExist) && opts.Global.searched == "":
		doc.Missing = append(doc.Missing, "the state file does not exist: "+opts.Global.StateFile)
	case err != nil:
		doc.Missing = append(doc.Missing, sentence(err))
	default:
		st := s.Control.Status
		doc.Status = &st
		doc.Missing = s.GateMissing()
	}
	doc.Ready = len(doc.Missing) == 0
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, doc)
	} else if doc.Ready {
		fmt.Fprintf(opts.IO.Out, "%s: the loop can start (status %s)\n", opts.IO.status("ready"), *doc.Status)
	} else {
		fmt.Fprintf(opts.IO.Out, "%s:\n", opts.IO.status("not ready"))
		for _, m := range doc.Missing {
			fmt.Fprintf(opts.IO.Out, "  - %s\n", m)
		}
	}
	if !doc.Ready {
		return reported(exitFail)
	}
	return nil
}
