package graphview

import (
	"cmp"
	"slices"
)

// Sizes of the layout, in pixels.
const (
	NodeW    = 210 // a node's width
	NodeH    = 46  // a node's height: the id, then the label
	layerGap = 70  // between two layers, for the arrows
	rowGap   = 30  // between two nodes of a layer, room for an OR group's title
	dummyGap = 12  // beside an edge passing a layer
	Margin   = 20
	groupPad = 8  // an OR group's box around its choices
	groupTop = 22 // and above them, for its title
	sweeps   = 12 // crossing-reduction sweeps, alternately down and up
)

// vertex is a node of the layout: a graph node, or a dummy where an edge
// passes a layer.
type vertex struct {
	node  int // index in Graph.Nodes, -1 for a dummy
	layer int
	group int     // OR group (index+1 in the layer's group keys), 0 for none
	up    []int32 // neighbours in the layer before
	down  []int32 // neighbours in the layer after
	pos   int     // index in its layer
	y     float64 // centre, across the layers
}

// layout places g's nodes in layers left to right (Sugiyama): longest-path
// layering, a dummy vertex wherever an edge skips a layer, barycentre sweeps
// that reduce crossings (keeping the best order seen and the choices of an
// OR group together), then positions across the layers that put each vertex
// near its neighbours' mean while keeping the layer's order and gaps
// (isotonic regression, exact and linear). Every step is linear or
// n log n in the vertices, so thousands of atoms stay fast.
func layout(g *Graph) {
	if len(g.Nodes) == 0 {
		g.Width, g.Height = 2*Margin, 2*Margin
		return
	}
	idx := make(map[string]int, len(g.Nodes))
	for i := range g.Nodes {
		idx[g.Nodes[i].ID] = i
	}
	type arc struct{ u, v int }
	arcs := make([]arc, 0, len(g.Edges))
	for _, e := range g.Edges {
		arcs = append(arcs, arc{idx[e.From], idx[e.To]})
	}
	layer := layers(len(g.Nodes), func(yield func(u, v int)) {
		for _, a := range arcs {
			yield(a.u, a.v)
		}
	})

	vs := make([]vertex, len(g.Nodes), len(g.Nodes)*2)
	groupKey := map[string]int{}
	for i := range g.Nodes {
		vs[i] = vertex{node: i, layer: layer[i]}
		if grp := g.Nodes[i].ORGroup; grp != "" {
			if _, ok := groupKey[grp]; !ok {
				groupKey[grp] = len(groupKey) + 1
			}
			vs[i].group = groupKey[grp]
		}
	}
	routes := make([][]int32, len(arcs)) // per edge: the dummies it passes, in order
	for k, a := range arcs {
		prev := a.u
		if layer[a.u] < layer[a.v] {
			for l := layer[a.u] + 1; l < layer[a.v]; l++ {
				d := len(vs)
				vs = append(vs, vertex{node: -1, layer: l})
				routes[k] = append(routes[k], int32(d))
				vs[prev].down = append(vs[prev].down, int32(d))
				vs[d].up = append(vs[d].up, int32(prev))
				prev = d
			}
			vs[prev].down = append(vs[prev].down, int32(a.v))
			vs[a.v].up = append(vs[a.v].up, int32(prev))
		}
	}
	depth := 0
	for i := range vs {
		depth = max(depth, vs[i].layer+1)
	}
	rows := make([][]int32, depth)
	for i := range vs {
		vs[i].pos = len(rows[vs[i].layer])
		rows[vs[i].layer] = append(rows[vs[i].layer], int32(i))
	}
	order(vs, rows)
	place(vs, rows)

	for i := range vs {
		v := &vs[i]
		if v.node < 0 {
			continue
		}
		n := &g.Nodes[v.node]
		n.Layer, n.W, n.H = v.layer, NodeW, NodeH
		n.X = Margin + v.layer*(NodeW+layerGap)
		n.Y = int(v.y) - NodeH/2
	}
	for k, a := range arcs {
		from, to := &g.Nodes[a.u], &g.Nodes[a.v]
		pts := []Point{{from.X + from.W, from.Y + from.H/2}}
		for _, d := range routes[k] {
			x := Margin + vs[d].layer*(NodeW+layerGap)
			pts = append(pts, Point{x, int(vs[d].y)}, Point{x + NodeW, int(vs[d].y)})
		}
		pts = append(pts, Point{to.X, to.Y + to.H/2})
		g.Edges[k].Points = pts
	}
	for i := range g.Groups {
		box(&g.Groups[i], g.Nodes, idx)
	}
	for _, n := range g.Nodes {
		g.Width = max(g.Width, n.X+n.W+Margin)
		g.Height = max(g.Height, n.Y+n.H+Margin)
	}
	for _, grp := range g.Groups {
		if grp.W > 0 {
			g.Height = max(g.Height, grp.Y+grp.H+Margin)
		}
	}
}

// layers gives each of n vertices its layer: one more than the deepest of
// its predecessors (longest path from the sources). A cycle (an invalid
// file) is broken at its first vertex in order.
func layers(n int, arcs func(yield func(u, v int))) []int {
	layer := make([]int, n)
	indeg := make([]int, n)
	succ := make([][]int, n)
	arcs(func(u, v int) {
		succ[u] = append(succ[u], v)
		indeg[v]++
	})
	done := make([]bool, n)
	queue := make([]int, 0, n)
	for i := range indeg {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	next := 0 // the first vertex that may still be undone, for breaking cycles
	for count := 0; count < n; {
		if len(queue) == 0 {
			for done[next] {
				next++
			}
			queue = append(queue, next)
			indeg[next] = 0
		}
		u := queue[0]
		queue = queue[1:]
		if done[u] {
			continue
		}
		done[u] = true
		count++
		for _, v := range succ[u] {
			if done[v] {
				continue // a back arc of a broken cycle
			}
			layer[v] = max(layer[v], layer[u]+1)
			if indeg[v]--; indeg[v] == 0 {
				queue = append(queue, v)
			}
		}
	}
	return layer
}

// order reduces crossings: each sweep sorts a layer by the mean position
// of its neighbours in the layer just sorted (the choices of an OR group
// sort by their group's mean, so they stay together), and the order with
// the fewest crossings seen is kept.
func order(vs []vertex, rows [][]int32) {
	best := snapshot(rows)
	bestX := crossings(vs, rows)
	key := make([]float64, len(vs))
	for s := 0; s < sweeps && bestX > 0; s++ {
		sweep(vs, rows, s, func(row []int32, nb func(int32) []int32) {
			groupSum := map[int][2]float64{}
			for _, v := range row {
				key[v] = mean(nb(v), float64(vs[v].pos), func(w int32) float64 { return float64(vs[w].pos) })
				if grp := vs[v].group; grp > 0 {
					gs := groupSum[grp]
					groupSum[grp] = [2]float64{gs[0] + key[v], gs[1] + 1}
				}
			}
			gkey := func(v int32) float64 {
				if grp := vs[v].group; grp > 0 {
					gs := groupSum[grp]
					return gs[0] / gs[1]
				}
				return key[v]
			}
			slices.SortStableFunc(row, func(a, b int32) int {
				return cmp.Or(cmp.Compare(gkey(a), gkey(b)), cmp.Compare(vs[a].group, vs[b].group), cmp.Compare(key[a], key[b]))
			})
			for p, v := range row {
				vs[v].pos = p
			}
		})
		if x := crossings(vs, rows); x < bestX {
			best, bestX = snapshot(rows), x
		}
	}
	for l, row := range best {
		copy(rows[l], row)
		for p, v := range rows[l] {
			vs[v].pos = p
		}
	}
}

// sweep visits the layers in sweep s's direction with each vertex's
// neighbours on the side already visited: down (from the first layer, the
// neighbours before) on even sweeps, up on odd ones.
func sweep(vs []vertex, rows [][]int32, s int, visit func(row []int32, nb func(int32) []int32)) {
	down := s%2 == 0
	nb := func(v int32) []int32 {
		if down {
			return vs[v].up
		}
		return vs[v].down
	}
	for k := range rows {
		if down {
			visit(rows[k], nb)
		} else {
			visit(rows[len(rows)-1-k], nb)
		}
	}
}

// mean is the mean of f over list, or alone when list is empty.
func mean(list []int32, alone float64, f func(int32) float64) float64 {
	if len(list) == 0 {
		return alone
	}
	sum := 0.0
	for _, w := range list {
		sum += f(w)
	}
	return sum / float64(len(list))
}

func snapshot(rows [][]int32) [][]int32 {
	out := make([][]int32, len(rows))
	for l := range rows {
		out[l] = slices.Clone(rows[l])
	}
	return out
}

// crossings counts the edge crossings between every two adjacent layers:
// the inversions of the lower ends when the edges are sorted by their upper
// ends, counted with a Fenwick tree.
func crossings(vs []vertex, rows [][]int32) int {
	total := 0
	var ends [][2]int
	var tree []int
	for l := 0; l+1 < len(rows); l++ {
		ends = ends[:0]
		for _, u := range rows[l] {
			for _, w := range vs[u].down {
				ends = append(ends, [2]int{vs[u].pos, vs[w].pos})
			}
		}
		slices.SortFunc(ends, func(a, b [2]int) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
		size := len(rows[l+1])
		tree = slices.Grow(tree[:0], size+1)[:size+1]
		clear(tree)
		for k, e := range ends {
			// edges seen so far whose lower end is to the right of e's
			le := 0
			for i := e[1] + 1; i > 0; i -= i & -i {
				le += tree[i]
			}
			total += k - le
			for i := e[1] + 1; i <= size; i += i & -i {
				tree[i]++
			}
		}
	}
	return total
}

// place sets each vertex's centre across the layers: alternately towards
// the mean of its neighbours before and after, each layer solved exactly
// (least squares under the layer's order and minimum gaps).
func place(vs []vertex, rows [][]int32) {
	height := func(v int32) float64 {
		if vs[v].node < 0 {
			return 0
		}
		return NodeH
	}
	// The gap between two neighbours of a layer leaves room for an OR
	// group's box and title where one starts or ends between them.
	gap := func(a, b int32) float64 {
		g := float64(rowGap)
		if vs[a].node < 0 || vs[b].node < 0 {
			g = dummyGap
		}
		if ga, gb := vs[a].group, vs[b].group; ga != gb {
			if gb > 0 {
				g = max(g, groupTop+dummyGap)
			}
			if ga > 0 {
				g = max(g, groupPad+dummyGap)
			}
			if ga > 0 && gb > 0 {
				g = groupTop + groupPad + dummyGap
			}
		}
		return g
	}
	for _, row := range rows {
		y := 0.0
		for k, v := range row {
			if k > 0 {
				y += (height(row[k-1])+height(v))/2 + gap(row[k-1], v)
			}
			vs[v].y = y
		}
	}
	want := make([]float64, len(vs))
	for s := 0; s < 8; s++ {
		sweep(vs, rows, s, func(row []int32, nb func(int32) []int32) {
			for _, v := range row {
				want[v] = mean(nb(v), vs[v].y, func(w int32) float64 { return vs[w].y })
			}
			fit(vs, row, want, height, gap)
		})
	}
	top := 0.0
	first := true
	for i := range vs {
		if t := vs[i].y - height(int32(i))/2; first || t < top {
			top, first = t, false
		}
	}
	for i := range vs {
		vs[i].y += Margin + groupTop - top
	}
}

// fit moves a layer's vertices as close to want as the order and the gaps
// allow: with offset[k] the least distance from the first vertex, the
// positions minus their offsets must not decrease, which is isotonic
// regression, solved by pooling adjacent violators.
func fit(vs []vertex, row []int32, want []float64, height func(int32) float64, gap func(a, b int32) float64) {
	type block struct {
		sum   float64
		count int
	}
	offset := make([]float64, len(row))
	for k := 1; k < len(row); k++ {
		offset[k] = offset[k-1] + (height(row[k-1])+height(row[k]))/2 + gap(row[k-1], row[k])
	}
	blocks := make([]block, 0, len(row))
	for k, v := range row {
		blocks = append(blocks, block{want[v] - offset[k], 1})
		for len(blocks) > 1 {
			a, b := blocks[len(blocks)-2], blocks[len(blocks)-1]
			if a.sum/float64(a.count) <= b.sum/float64(b.count) {
				break
			}
			blocks = blocks[:len(blocks)-1]
			blocks[len(blocks)-1] = block{a.sum + b.sum, a.count + b.count}
		}
	}
	k := 0
	for _, b := range blocks {
		z := b.sum / float64(b.count)
		for j := 0; j < b.count; j++ {
			vs[row[k]].y = z + offset[k]
			k++
		}
	}
}

// box sets an OR group's box around its shown choices.
func box(grp *Group, nodes []Node, idx map[string]int) {
	first := true
	var x0, y0, x1, y1 int
	for _, c := range grp.Choices {
		i, ok := idx[c]
		if !ok {
			continue
		}
		n := nodes[i]
		if first {
			x0, y0, x1, y1, first = n.X, n.Y, n.X+n.W, n.Y+n.H, false
			continue
		}
		x0, y0, x1, y1 = min(x0, n.X), min(y0, n.Y), max(x1, n.X+n.W), max(y1, n.Y+n.H)
	}
	if first {
		return
	}
	grp.X, grp.Y = x0-groupPad, y0-groupTop
	grp.W, grp.H = x1-x0+2*groupPad, y1-y0+groupTop+groupPad
}
