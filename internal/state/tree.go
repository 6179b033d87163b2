package state

// The generic YAML tree that both readers (the fast scanner for the block
// layout aot writes, and the full YAML library for everything else) produce,
// so one decoder turns either into a State. Nodes live in one slice and link
// to each other by index: a 100,000-atom file makes about a million nodes, and
// one allocation for all of them keeps reads fast and memory small.

type kind uint8

const (
	kScalar kind = iota + 1
	kMap
	kSeq
)

type style uint8

const (
	stPlain style = iota
	stSingle
	stDouble
	stLiteral
	stFolded
	stFlow  // a flow collection: [a, b] or {}
	stBlock // a block collection
	stOther // no usable source span (from the YAML library, or built in memory)
)

type tag uint8

const (
	tStr tag = iota
	tNull
	tBool
	tInt
	tFloat
)

// node is a scalar, a mapping (children alternate key, value) or a sequence.
type node struct {
	kind  kind
	style style
	tag   tag
	line  int32
	// Source spans, valid only when the tree has spans: the value itself,
	// and for map keys and sequence items the whole entry: lstart is the start
	// of its first line, eend the end of its last line (newline included),
	// colon the offset just after its ':' or '-' indicator.
	start, end, lstart, eend, colon int32
	indent                          int32 // column of a block collection's entries
	first, last, next               int32 // children, linked by index; 0 = none
	val                             string
}

type tree struct {
	src   string
	nodes []node // nodes[0] is unused so that 0 means "none"
	spans bool   // nodes carry source spans (fast scanner)
}

func newTree(src string, capHint int) *tree {
	t := &tree{src: src, nodes: make([]node, 1, capHint+1)}
	return t
}

func (t *tree) add(n node) int32 {
	t.nodes = append(t.nodes, n)
	return int32(len(t.nodes) - 1)
}

// appendChild links child as the last child of parent.
func (t *tree) appendChild(parent, child int32) {
	p := &t.nodes[parent]
	if p.first == 0 {
		p.first = child
	} else {
		t.nodes[p.last].next = child
	}
	p.last = child
}

// mapGet returns the key and value nodes of key in map m, or 0, 0.
func (t *tree) mapGet(m int32, key string) (int32, int32) {
	if m == 0 || t.nodes[m].kind != kMap {
		return 0, 0
	}
	for k := t.nodes[m].first; k != 0; k = t.nodes[t.nodes[k].next].next {
		if t.nodes[k].val == key {
			return k, t.nodes[k].next
		}
	}
	return 0, 0
}

func (t *tree) scalar(val string, tg tag) int32 {
	return t.add(node{kind: kScalar, style: stOther, tag: tg, val: val})
}

func (t *tree) newMap() int32 { return t.add(node{kind: kMap, style: stOther}) }
func (t *tree) newSeq() int32 { return t.add(node{kind: kSeq, style: stOther}) }

// set appends key: val to map m.
func (t *tree) set(m int32, key string, val int32) {
	k := t.scalar(key, tStr)
	t.appendChild(m, k)
	t.nodes[k].next = val
	t.nodes[m].last = val
}

// keySet detects duplicate keys of one mapping: a linear scan while the
// mapping is small, a hash set once it is large (bindings of 100,000 atoms).
type keySet struct {
	n   int
	set map[string]struct{}
}

func (k *keySet) add(t *tree, m int32, key string) bool {
	k.n++
	if k.set == nil && k.n <= 16 {
		_, v := t.mapGet(m, key)
		return v == 0
	}
	if k.set == nil {
		k.set = make(map[string]struct{}, 64)
		for c := t.nodes[m].first; c != 0; c = t.nodes[t.nodes[c].next].next {
			k.set[t.nodes[c].val] = struct{}{}
		}
	}
	if _, dup := k.set[key]; dup {
		return false
	}
	k.set[key] = struct{}{}
	return true
}
