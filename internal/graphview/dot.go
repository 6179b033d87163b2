package graphview

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// DOT writes g as a Graphviz digraph with the same semantics as Mermaid:
// each OR group a cluster, decomposition edges dashed, a dependency on an OR
// group leaving the group's cluster, the critical path amber and thick.
// Render it with `dot -Tsvg` or `dot -Tpng`.
func DOT(w io.Writer, g *Graph) error {
	bw := bufio.NewWriter(w)
	ids, gids := nodeIDs(g), groupIDs(g)
	const font = `"Helvetica,Arial,sans-serif"`
	bw.WriteString("digraph aot {\n")
	fmt.Fprintf(bw, "  graph [rankdir=LR, compound=true, fontname=%s, fontsize=11, nodesep=0.3, ranksep=0.6];\n", font)
	fmt.Fprintf(bw, "  node [shape=box, style=\"rounded,filled\", fontname=%s, fontsize=11];\n", font)
	fmt.Fprintf(bw, "  edge [color=%q, arrowsize=0.7];\n", colorEdge)
	node := func(indent string, n *Node) {
		l := lookOf(n)
		style := "rounded,filled"
		if l.dashed {
			style += ",dashed"
		}
		stroke, width := l.stroke, "1"
		if n.Critical {
			stroke, width = colorCritical, "3"
		}
		fmt.Fprintf(bw, "%s%s [label=%s, tooltip=%s, style=%q, fillcolor=%q, color=%q, fontcolor=%q, penwidth=%s];\n",
			indent, ids[n.ID], dotString(cut(plain(n.ID), labelRunes)+"\n"+n.Label),
			dotString(plain(n.ID)+" ("+n.Status+"): "+plain(n.Description)), style, l.fill, stroke, l.text, width)
	}
	groups, loose := clusters(g, gids)
	for _, c := range groups {
		fmt.Fprintf(bw, "  subgraph cluster_%s {\n    label=%s; labeljust=l; style=\"dashed,rounded\"; color=%q;\n", c.id, dotString(groupTitle(c.group)), colorGroup)
		for _, n := range c.nodes {
			node("    ", n)
		}
		bw.WriteString("  }\n")
	}
	for _, n := range loose {
		node("  ", n)
	}
	if len(g.Nodes) == 0 {
		bw.WriteString("  empty [shape=plaintext, style=\"\", label=\"no atoms\"];\n")
	}
	if g.Note != "" {
		fmt.Fprintf(bw, "  more [shape=plaintext, style=\"\", fontcolor=%q, label=%s];\n", colorNote, dotString(g.Note))
	}
	for _, e := range g.Edges {
		var attrs []string
		switch e.Kind {
		case KindDecomposes:
			attrs = append(attrs, "style=dashed", fmt.Sprintf("color=%q", colorDecomp))
		case KindOR:
			if gid, ok := gids[e.Group]; ok {
				attrs = append(attrs, "ltail=cluster_"+gid)
			}
		}
		if e.Critical {
			attrs = append(attrs, fmt.Sprintf("color=%q", colorCritical), "penwidth=3")
		}
		fmt.Fprintf(bw, "  %s -> %s", ids[e.From], ids[e.To])
		if len(attrs) > 0 {
			fmt.Fprintf(bw, " [%s]", strings.Join(attrs, ", "))
		}
		bw.WriteString(";\n")
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// dotString quotes text as a DOT string: backslashes and quotes escaped,
// '&' as an entity (Graphviz reads entities in labels), a newline as the
// centred line break \n, other control characters as spaces.
func dotString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteString(`\n`)
		}
		for _, r := range plain(line) {
			switch r {
			case '\\':
				b.WriteString(`\\`)
			case '"':
				b.WriteString(`\"`)
			case '&':
				b.WriteString("&amp;")
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
