package graphview

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Mermaid writes g as a Mermaid flowchart, left to right: a classDef per
// look, each OR group a subgraph, decomposition edges dashed, a dependency
// on an OR group drawn from the group, the critical path's nodes and edges
// amber and thick. GitHub renders it in a ```mermaid block.
func Mermaid(w io.Writer, g *Graph) error {
	bw := bufio.NewWriter(w)
	ids, gids := nodeIDs(g), groupIDs(g)
	bw.WriteString("flowchart LR\n")
	for _, l := range looks {
		fmt.Fprintf(bw, "  classDef %s fill:%s,stroke:%s,color:%s", l.class, l.fill, l.stroke, l.text)
		if l.dashed {
			bw.WriteString(",stroke-dasharray:4 3")
		}
		bw.WriteByte('\n')
	}
	fmt.Fprintf(bw, "  classDef critical stroke:%s,stroke-width:3px\n", colorCritical)
	fmt.Fprintf(bw, "  classDef note fill:#ffffff,stroke:#ffffff,color:%s\n", colorNote)
	node := func(indent string, n *Node) {
		fmt.Fprintf(bw, "%s%s[\"%s<br/>%s\"]\n", indent, ids[n.ID], mermaidText(cut(plain(n.ID), labelRunes)), mermaidText(n.Label))
	}
	groups, loose := clusters(g, gids)
	for _, c := range groups {
		fmt.Fprintf(bw, "  subgraph %s[\"%s\"]\n", c.id, mermaidText(groupTitle(c.group)))
		for _, n := range c.nodes {
			node("    ", n)
		}
		bw.WriteString("  end\n")
	}
	for _, n := range loose {
		node("  ", n)
	}
	if len(g.Nodes) == 0 {
		bw.WriteString("  empty[\"no atoms\"]:::note\n")
	}
	if g.Note != "" {
		fmt.Fprintf(bw, "  more[\"%s\"]:::note\n", mermaidText(g.Note))
	}
	var critical []string
	for k, e := range g.Edges {
		from, arrow := ids[e.From], "-->"
		switch e.Kind {
		case KindDecomposes:
			arrow = "-.->"
		case KindOR:
			if gid, ok := gids[e.Group]; ok {
				from = gid
			}
		}
		fmt.Fprintf(bw, "  %s %s %s\n", from, arrow, ids[e.To])
		if e.Critical {
			critical = append(critical, itoa(k))
		}
	}
	byClass := map[string][]string{}
	var crit []string
	for i := range g.Nodes {
		n := &g.Nodes[i]
		c := lookOf(n).class
		byClass[c] = append(byClass[c], ids[n.ID])
		if n.Critical {
			crit = append(crit, ids[n.ID])
		}
	}
	for _, l := range looks {
		if list := byClass[l.class]; len(list) > 0 {
			fmt.Fprintf(bw, "  class %s %s\n", strings.Join(list, ","), l.class)
		}
	}
	if len(crit) > 0 {
		fmt.Fprintf(bw, "  class %s critical\n", strings.Join(crit, ","))
	}
	if len(critical) > 0 {
		fmt.Fprintf(bw, "  linkStyle %s stroke:%s,stroke-width:3px\n", strings.Join(critical, ","), colorCritical)
	}
	return bw.Flush()
}

// mermaidText escapes text for a quoted Mermaid label: the characters that
// end a string, start an entity, a comment or markdown, or make HTML are
// written as Mermaid's entity codes (#35; is '#'), newlines as spaces.
func mermaidText(s string) string {
	var b strings.Builder
	for _, r := range plain(s) {
		switch r {
		case '"', '#', '&', '<', '>', '`', '%', '\\', '{', '}', '|':
			fmt.Fprintf(&b, "#%d;", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
