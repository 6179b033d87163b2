package graphview

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// legendH is the height of the legend under the graph.
const legendH = 64

// SVG writes g as a self-contained SVG image: presentation attributes only
// (no CSS, no external fonts or links), so GitHub shows it as an image in a
// README, an issue or a review. Nodes are coloured by status (pending grey,
// in progress blue, resolved green, a failed OR choice red, an OR choice not
// taken faded), the critical path is amber and thick, each node's tooltip is
// its whole description, and a legend sits under the graph.
func SVG(w io.Writer, g *Graph) error {
	bw := bufio.NewWriter(w)
	width := max(g.Width, 760)
	top := g.Height
	if len(g.Nodes) == 0 {
		top = 2*Margin + 20
	}
	height := top + legendH
	if g.Note != "" {
		height += 20
	}
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	bw.WriteString("<title>aot work graph</title>\n")
	bw.WriteString("<defs>\n")
	for _, m := range [][2]string{{"aot-arrow", colorEdge}, {"aot-arrow-decomp", colorDecomp}, {"aot-arrow-critical", colorCritical}} {
		fmt.Fprintf(bw, `<marker id="%s" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>`+"\n", m[0], m[1])
	}
	bw.WriteString("</defs>\n")
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)

	for _, grp := range g.Groups {
		if grp.W == 0 {
			continue
		}
		color := colorGroup
		if grp.Exhausted {
			color = lookFailed.stroke
		}
		fmt.Fprintf(bw, `<g><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="8" fill="#fafafa" stroke="%s" stroke-dasharray="5 4"/>`,
			xmlText("OR group "+plain(grp.ID)+": choices "+strings.Join(grp.Choices, ", ")+"; selected "+orDash(grp.Selected)), grp.X, grp.Y, grp.W, grp.H, color)
		fmt.Fprintf(bw, `<text x="%d" y="%d" font-size="11" fill="%s">%s</text></g>`+"\n", grp.X+8, grp.Y+15, color, xmlText(groupTitle(&grp)))
	}
	for _, e := range g.Edges {
		stroke, width, marker, dash := colorEdge, "1.5", "aot-arrow", ""
		switch e.Kind {
		case KindDecomposes:
			stroke, marker, dash = colorDecomp, "aot-arrow-decomp", ` stroke-dasharray="6 4"`
		case KindOR:
			dash = ` stroke-dasharray="2 3"`
		}
		if e.Critical {
			stroke, width, marker = colorCritical, "3.5", "aot-arrow-critical"
		}
		fmt.Fprintf(bw, `<path d="%s" fill="none" stroke="%s" stroke-width="%s"%s marker-end="url(#%s)"/>`+"\n", curve(e.Points), stroke, width, dash, marker)
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		l := lookOf(n)
		stroke, sw, dash := l.stroke, "1", ""
		if l.dashed {
			dash = ` stroke-dasharray="4 3"`
		}
		if n.Critical {
			stroke, sw = colorCritical, "3"
		}
		status := n.Status
		switch {
		case n.Failed:
			status += ", failed"
		case n.Faded():
			status += ", not selected"
		}
		fmt.Fprintf(bw, `<g><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="%s" stroke-width="%s"%s/>`,
			xmlText(plain(n.ID)+" ("+status+"): "+plain(n.Description)), n.X, n.Y, n.W, n.H, l.fill, stroke, sw, dash)
		fmt.Fprintf(bw, `<text x="%d" y="%d" font-weight="bold" fill="%s">%s</text>`, n.X+10, n.Y+18, l.text, xmlText(cut(plain(n.ID), labelRunes)))
		fmt.Fprintf(bw, `<text x="%d" y="%d" font-size="11" fill="%s">%s</text></g>`+"\n", n.X+10, n.Y+35, l.text, xmlText(n.Label))
	}
	if len(g.Nodes) == 0 {
		fmt.Fprintf(bw, `<text x="%d" y="%d" fill="%s">no atoms</text>`+"\n", Margin, Margin+14, colorNote)
	}
	legend(bw, top)
	if g.Note != "" {
		fmt.Fprintf(bw, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", Margin, top+legendH+8, colorNote, xmlText(g.Note))
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// legend draws the looks and the edge kinds in two rows from y.
func legend(bw *bufio.Writer, y int) {
	x := Margin
	names := map[string]string{"pending": "pending", "in_progress": "in progress", "resolved": "resolved", "failed": "failed OR choice", "not_selected": "OR choice not taken"}
	for _, l := range looks {
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(bw, `<rect x="%d" y="%d" width="16" height="12" rx="3" fill="%s" stroke="%s"%s/><text x="%d" y="%d" font-size="11" fill="#374151">%s</text>`+"\n",
			x, y+8, l.fill, l.stroke, dash, x+22, y+18, names[l.class])
		x += 22 + 7*len(names[l.class]) + 18
	}
	x = Margin
	for _, e := range []struct{ name, stroke, width, dash string }{
		{"depends on", colorEdge, "1.5", ""},
		{"on an OR group", colorEdge, "1.5", ` stroke-dasharray="2 3"`},
		{"decomposed into", colorDecomp, "1.5", ` stroke-dasharray="6 4"`},
		{"critical path", colorCritical, "3.5", ""},
	} {
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%s"%s/><text x="%d" y="%d" font-size="11" fill="#374151">%s</text>`+"\n",
			x, y+40, x+28, y+40, e.stroke, e.width, e.dash, x+34, y+44, e.name)
		x += 34 + 7*len(e.name) + 18
	}
}

// curve is an SVG path through points: horizontal-tangent cubic segments,
// so edges leave and enter nodes straight.
func curve(pts []Point) string {
	if len(pts) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "M%d,%d", pts[0].X, pts[0].Y)
	for k := 1; k < len(pts); k++ {
		p, q := pts[k-1], pts[k]
		if p.Y == q.Y {
			fmt.Fprintf(&b, " L%d,%d", q.X, q.Y)
			continue
		}
		dx := (q.X - p.X) / 2
		if dx < 20 && dx > -20 {
			dx = 20
		}
		fmt.Fprintf(&b, " C%d,%d %d,%d %d,%d", p.X+dx, p.Y, q.X-dx, q.Y, q.X, q.Y)
	}
	return b.String()
}

// xmlText escapes text for XML content and attribute values; plain has
// already removed the characters XML does not allow.
func xmlText(s string) string {
	var b strings.Builder
	for _, r := range plain(s) {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&#39;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
