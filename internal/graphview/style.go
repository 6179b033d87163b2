package graphview

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// look is how a node is drawn in every format.
type look struct {
	class  string // the Mermaid class and the legend's name
	fill   string
	stroke string
	text   string
	dashed bool
}

// The looks: pending grey, in progress blue, resolved green, a failed OR
// choice red, an OR choice the loop is not taking faded.
var (
	lookPending    = look{"pending", "#f3f4f6", "#9ca3af", "#374151", false}
	lookInProgress = look{"in_progress", "#dbeafe", "#2563eb", "#1e3a8a", false}
	lookResolved   = look{"resolved", "#dcfce7", "#16a34a", "#14532d", false}
	lookFailed     = look{"failed", "#fee2e2", "#dc2626", "#7f1d1d", false}
	lookFaded      = look{"not_selected", "#ffffff", "#d1d5db", "#9ca3af", true}
	looks          = []look{lookPending, lookInProgress, lookResolved, lookFailed, lookFaded}
)

// Colours of edges and of the critical path.
const (
	colorEdge     = "#6b7280"
	colorDecomp   = "#9ca3af"
	colorCritical = "#d97706"
	colorGroup    = "#6b7280"
	colorNote     = "#6b7280"
)

func lookOf(n *Node) look {
	switch {
	case n.Failed:
		return lookFailed
	case n.Faded():
		return lookFaded
	case n.Status == "in_progress":
		return lookInProgress
	case n.Status == "resolved":
		return lookResolved
	}
	return lookPending
}

// plain makes text safe to put anywhere: valid UTF-8, every control
// character (newlines included) a space.
func plain(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\uFFFE' || r == '\uFFFF' {
			return ' '
		}
		return r
	}, s)
}

// cut shortens s to at most n runes, ending with an ellipsis when cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}

// groupTitle is the caption of an OR group's box.
func groupTitle(g *Group) string {
	t := "OR " + plain(g.ID)
	if g.Exhausted {
		t += " (exhausted)"
	}
	return cut(t, 34)
}

// nodeIDs names nodes for formats whose identifiers are restricted: n0, n1,
// ... in graph order; the atom id goes into the label.
func nodeIDs(g *Graph) map[string]string {
	ids := make(map[string]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[n.ID] = "n" + itoa(i)
	}
	return ids
}

// groupIDs names the OR groups that have a shown choice: g0, g1, ...
func groupIDs(g *Graph) map[string]string {
	ids := map[string]string{}
	for i, grp := range g.Groups {
		if grp.W > 0 {
			ids[grp.ID] = "g" + itoa(i)
		}
	}
	return ids
}

func itoa(i int) string {
	var b [20]byte
	k := len(b)
	for {
		k--
		b[k] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[k:])
		}
	}
}

// cluster is an OR group with a shown choice, and its nodes.
type cluster struct {
	id    string // g0, g1, ... (see groupIDs)
	group *Group
	nodes []*Node
}

// clusters splits the nodes into the OR groups' clusters and the rest, each
// in graph order.
func clusters(g *Graph, gids map[string]string) (groups []cluster, loose []*Node) {
	at := map[string]int{}
	for i := range g.Groups {
		if id, ok := gids[g.Groups[i].ID]; ok {
			at[g.Groups[i].ID] = len(groups)
			groups = append(groups, cluster{id: id, group: &g.Groups[i]})
		}
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if k, ok := at[n.ORGroup]; ok && n.ORGroup != "" {
			groups[k].nodes = append(groups[k].nodes, n)
		} else {
			loose = append(loose, n)
		}
	}
	return groups, loose
}
