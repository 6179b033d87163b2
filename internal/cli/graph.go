package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/graphview"
	"github.com/aot-loop/aot/internal/state"
)

type graphOptions struct {
	IO       *streams
	Global   *globalOptions
	Format   string // mermaid, dot, svg or json
	Output   string // a file; "" for stdout
	MaxNodes int    // 0 shows every atom
}

// graphFormats are --format's values and what writes each.
var graphFormats = map[string]func(io.Writer, *graphview.Graph) error{
	"mermaid": graphview.Mermaid,
	"dot":     graphview.DOT,
	"svg":     graphview.SVG,
	"json":    writeGraphJSON,
}

var graphFormatNames = []string{"mermaid", "dot", "svg", "json"}

// graphExtensions give -o FILE's format when --format is not given.
var graphExtensions = map[string]string{".mmd": "mermaid", ".mermaid": "mermaid", ".dot": "dot", ".gv": "dot", ".svg": "svg", ".json": "json"}

const graphLong = `Draw the work graph: every atom coloured by status (pending grey, in
progress blue, resolved green, a failed OR choice red, an OR choice not
taken faded), dependencies as arrows, decompositions as dashed arrows from
the parent to its children, each OR group boxed with its choices, and the
critical path in thick amber.

The critical path is the longest chain of unresolved atoms that still
bounds completion: atoms not resolved, only the selected choice of an OR
group, linked by depends_on (a dependency on any choice of a group waits for
its selected choice) and by decomposition (an open parent waits for its
children and adds no work of its own); ties go to the chain that starts
first in the file.

Formats: mermaid (the default; a flowchart GitHub draws inside a
` + "```mermaid" + ` block), dot (Graphviz: dot -Tpng), svg (a self-contained
image with a legend: no scripts, fonts or styles from elsewhere, shown by
GitHub in READMEs, issues and reviews) and json (the laid-out graph the
web dashboard draws). -o FILE writes the file instead of stdout; without
--format, a FILE ending in .mmd, .dot, .gv, .svg or .json picks the format.

Over --max-nodes atoms (default 250; 0 shows all) the picture keeps the
critical path, the atoms in progress, the executable ones, the other
unresolved ones and the resolved atoms they build on, in that order, and
says how many more there are.

A state file that is missing, cannot be read or does not validate is an
error (exit 1); aot validate lists what is wrong with it.

JSON: the graph, {nodes: [{id, label, description, status, executable,
or_group, selected, failed, parent, critical, layer, x, y, w, h}], edges:
[{from, to, kind: depends|decomposes|or, group, critical, points: [{x, y}]}],
groups: [{id, choices, selected, failed, exhausted, x, y, w, h}],
critical_path: [id], omitted, note, width, height}; with -o FILE,
{success, file, format, nodes, omitted}.`

func newCmdGraph(d *deps, g *globalOptions, runF func(*graphOptions) error) *cobra.Command {
	opts := &graphOptions{IO: d.io, Global: g}
	cmd := &cobra.Command{
		Use:   "graph [--format mermaid|dot|svg|json] [-o FILE] [--max-nodes N]",
		Short: "The work graph as a picture: Mermaid, Graphviz DOT, SVG or JSON",
		Long:  graphLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if !flagChanged(cmd.Flags(), "format") {
				opts.Format = "mermaid"
				if f, ok := graphExtensions[strings.ToLower(filepath.Ext(opts.Output))]; ok {
					opts.Format = f
				} else if g.JSON && opts.Output == "" {
					opts.Format = "json"
				}
			}
			if _, ok := graphFormats[opts.Format]; !ok {
				return usagef("invalid --format %q (choose from %s)", opts.Format, quotedList(graphFormatNames))
			}
			if g.JSON && opts.Output == "" && opts.Format != "json" {
				return usagef("--json prints the graph as JSON on stdout; write the %s picture to a file with -o FILE", opts.Format)
			}
			if opts.MaxNodes < 0 {
				return usagef("--max-nodes must not be negative")
			}
			if runF != nil {
				return runF(opts)
			}
			return graphRun(opts)
		}),
	}
	cmd.Flags().StringVar(&opts.Format, "format", "mermaid", "`format`: mermaid, dot, svg or json")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "write to `FILE` instead of stdout")
	cmd.Flags().IntVar(&opts.MaxNodes, "max-nodes", graphview.DefaultMaxNodes, "show at most `N` atoms (0: all)")
	return cmd
}

type graphFileDoc struct {
	Success bool   `json:"success"`
	File    string `json:"file"`
	Format  string `json:"format"`
	Nodes   int    `json:"nodes"`
	Omitted int    `json:"omitted"`
}

func graphRun(opts *graphOptions) error {
	s, err := readState(opts.Global)
	if err != nil {
		return err
	}
	if r := state.Validate(s); len(r.Errors) > 0 {
		return fmt.Errorf("%s does not validate: %s%s; repair it first (aot validate lists every error)",
			opts.Global.StateFile, r.Errors[0], andMore(len(r.Errors)-1))
	}
	max := opts.MaxNodes
	if max == 0 {
		max = -1
	}
	g := graphview.Build(s, graphview.Options{MaxNodes: max})
	var buf bytes.Buffer
	if err := graphFormats[opts.Format](&buf, g); err != nil {
		return err
	}
	if opts.Output == "" {
		_, err := opts.IO.Out.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(opts.Output, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write the graph: %w", err)
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, graphFileDoc{Success: true, File: opts.Output, Format: opts.Format, Nodes: len(g.Nodes), Omitted: g.Omitted})
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s (%s, %d atoms", opts.Output, opts.Format, len(g.Nodes))
	if g.Omitted > 0 {
		fmt.Fprintf(opts.IO.Out, "; %s", g.Note)
	}
	fmt.Fprintln(opts.IO.Out, ")")
	return nil
}

// writeGraphJSON writes the graph as one indented JSON document, as
// writeJSON does (UTF-8 raw, no HTML escaping).
func writeGraphJSON(w io.Writer, g *graphview.Graph) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(g)
}
