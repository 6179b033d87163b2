package state

import (
	"sort"
	"strings"
)

// A write replaces only the bytes of what changed: the patcher compares the
// tree read from the file with the canonical tree of the new state and emits
// edits. Unchanged entries keep their bytes, comments and unknown keys.

type edit struct {
	start, end int
	text       string
}

type patcher struct {
	old   *tree
	new   *tree
	edits []edit
}

func (p *patcher) replace(start, end int, text string) {
	p.edits = append(p.edits, edit{start, end, text})
}

// appendEdits appends src with the edits applied to buf.
func appendEdits(buf []byte, src string, edits []edit) []byte {
	sort.SliceStable(edits, func(i, j int) bool {
		if edits[i].start != edits[j].start {
			return edits[i].start < edits[j].start
		}
		return edits[i].end < edits[j].end
	})
	cur := 0
	for _, e := range edits {
		buf = append(buf, src[cur:e.start]...)
		buf = append(buf, e.text...)
		cur = e.end
	}
	return append(buf, src[cur:]...)
}

// same reports whether old node o already holds what new node n says.
func (p *patcher) same(o, n int32) bool {
	on, nn := &p.old.nodes[o], &p.new.nodes[n]
	if on.kind != nn.kind {
		return false
	}
	switch on.kind {
	case kScalar:
		if on.tag != nn.tag {
			return false
		}
		switch on.tag {
		case tNull:
			return true
		case tBool:
			return renderScalar(p.old, o) == renderScalar(p.new, n)
		}
		return on.val == nn.val
	case kSeq:
		oc, nc := on.first, nn.first
		for oc != 0 && nc != 0 {
			if !p.same(oc, nc) {
				return false
			}
			oc, nc = p.old.nodes[oc].next, p.new.nodes[nc].next
		}
		return oc == 0 && nc == 0
	}
	for k := nn.first; k != 0; k = p.new.nodes[p.new.nodes[k].next].next {
		_, ov := p.old.mapGet(o, p.new.nodes[k].val)
		if ov == 0 || !p.same(ov, p.new.nodes[k].next) {
			return false
		}
	}
	own := uint8(nn.tag)
	for k := on.first; k != 0; k = p.old.nodes[p.old.nodes[k].next].next {
		if owns(own, p.old.nodes[k].val) {
			if _, nv := p.new.mapGet(n, p.old.nodes[k].val); nv == 0 {
				return false
			}
		}
	}
	return true
}

// keepUnknown copies the keys of old map o that the new map n does not own
// into n, so that a rewrite of a value keeps what other tools put there.
func (p *patcher) keepUnknown(o, n int32) {
	on, nn := p.old.nodes[o], p.new.nodes[n]
	if on.kind != nn.kind {
		return
	}
	switch on.kind {
	case kMap:
		for k := on.first; k != 0; k = p.old.nodes[p.old.nodes[k].next].next {
			key := p.old.nodes[k].val
			_, nv := p.new.mapGet(n, key)
			if nv != 0 {
				p.keepUnknown(p.old.nodes[k].next, nv)
			} else if !owns(uint8(nn.tag), key) {
				p.new.set(n, key, copyNode(p.old, p.old.nodes[k].next, p.new))
			}
		}
	case kSeq:
		oc, nc := on.first, nn.first
		for oc != 0 && nc != 0 {
			p.keepUnknown(oc, nc)
			oc, nc = p.old.nodes[oc].next, p.new.nodes[nc].next
		}
	}
}

// copyNode copies node n of tree from into tree to.
func copyNode(from *tree, n int32, to *tree) int32 {
	src := from.nodes[n]
	c := to.add(node{kind: src.kind, style: stOther, tag: src.tag, val: src.val})
	if src.style == stDouble || src.style == stSingle || src.style == stLiteral || src.style == stFolded {
		to.nodes[c].style = stDouble
	}
	switch src.kind {
	case kMap:
		to.nodes[c].tag = tag(ownNone)
		for k := src.first; k != 0; k = from.nodes[from.nodes[k].next].next {
			to.set(c, from.nodes[k].val, copyNode(from, from.nodes[k].next, to))
		}
	case kSeq:
		for it := src.first; it != 0; it = from.nodes[it].next {
			to.appendChild(c, copyNode(from, it, to))
		}
	}
	return c
}

// value patches the value o of an entry (map key k or sequence item) into n.
// colon is the offset after the entry's indicator, indent its column, eend
// where the entry ends.
func (p *patcher) value(o, n int32, colon, indent, eend int, inSeq bool) {
	if p.same(o, n) {
		return
	}
	on, nn := &p.old.nodes[o], &p.new.nodes[n]
	switch {
	case on.kind == kMap && nn.kind == kMap && on.style == stBlock && nn.first != 0:
		if p.mapEntries(o, n) {
			return
		}
	case on.kind == kSeq && nn.kind == kSeq && on.style == stBlock && nn.first != 0 && p.new.nodes[nn.first].kind == kMap:
		p.seqItems(o, n)
		return
	case on.kind == kScalar && nn.kind == kScalar && on.style != stOther:
		text := renderScalar(p.new, n)
		if on.start == on.end { // an empty value: "key:" or "key:  # comment"
			p.replace(colon, colon, " "+text)
		} else {
			p.replace(int(on.start), int(on.end), text)
		}
		return
	case on.kind == kSeq && on.style == stFlow || on.kind == kMap && on.style == stFlow:
		if s, ok := renderInline(p.new, n); ok {
			p.replace(int(on.start), int(on.end), s)
			return
		}
	}
	// Rewrite the whole value after the indicator, keeping unknown keys. A
	// scalar or flow value ends with its line: comment and blank lines after
	// it belong to what follows and are kept.
	p.keepUnknown(o, n)
	end := eend
	if on.kind == kScalar || on.style == stFlow {
		if i := strings.IndexByte(p.old.src[on.end:], '\n'); i >= 0 && int(on.end)+i+1 < end {
			end = int(on.end) + i + 1
		}
	}
	var b strings.Builder
	renderAfterIndicator(&b, p.new, n, indent, inSeq)
	p.replace(colon, end, b.String())
}

// mapEntries patches block map o entry by entry; false when it cannot.
func (p *patcher) mapEntries(o, n int32) bool {
	on, nn := &p.old.nodes[o], &p.new.nodes[n]
	own := uint8(nn.tag)
	indent := int(on.indent)
	for k := on.first; k != 0; k = p.old.nodes[p.old.nodes[k].next].next {
		kn := &p.old.nodes[k]
		if _, nv := p.new.mapGet(n, kn.val); nv == 0 && owns(own, kn.val) && int(kn.start) != int(kn.lstart)+indent {
			return false // deleting the key that shares the line of "- " needs a rewrite
		}
	}
	for k := on.first; k != 0; k = p.old.nodes[p.old.nodes[k].next].next {
		kn := p.old.nodes[k]
		_, nv := p.new.mapGet(n, kn.val)
		if nv != 0 {
			p.value(kn.next, nv, int(kn.colon), indent, int(kn.eend), false)
		} else if owns(own, kn.val) {
			p.replace(int(kn.lstart), int(kn.eend), "")
		}
	}
	var b strings.Builder
	for k := nn.first; k != 0; k = p.new.nodes[p.new.nodes[k].next].next {
		if ok, _ := p.old.mapGet(o, p.new.nodes[k].val); ok == 0 {
			pad(&b, indent)
			renderEntry(&b, p.new, k, indent)
		}
	}
	if b.Len() > 0 {
		p.replace(int(on.end), int(on.end), b.String())
	}
	return true
}

// itemKey identifies a sequence item across old and new: its "id" (atoms),
// "parent" (decompositions) or nothing.
func itemKey(t *tree, n int32) string {
	for _, k := range []string{"id", "parent"} {
		if _, v := t.mapGet(n, k); v != 0 && t.nodes[v].kind == kScalar {
			return k + "\x00" + t.nodes[v].val
		}
	}
	return ""
}

// seqItems patches a block sequence item by item, matching items by key or position.
func (p *patcher) seqItems(o, n int32) {
	on := &p.old.nodes[o]
	indent := int(on.indent)
	var olds []int32
	byKey := map[string]int{}
	for c := on.first; c != 0; c = p.old.nodes[c].next {
		if k := itemKey(p.old, c); k != "" {
			if _, dup := byKey[k]; !dup {
				byKey[k] = len(olds)
			}
		}
		olds = append(olds, c)
	}
	used := make([]bool, len(olds))
	insertAt := int(on.start)
	if len(olds) > 0 {
		insertAt = int(p.old.nodes[olds[0]].lstart)
	}
	pos := 0
	for c := p.new.nodes[n].first; c != 0; c = p.new.nodes[c].next {
		match := -1
		if k := itemKey(p.new, c); k != "" {
			if i, ok := byKey[k]; ok && !used[i] {
				match = i
			}
		} else if pos < len(olds) && !used[pos] && itemKey(p.old, olds[pos]) == "" {
			match = pos
		}
		pos++
		if match >= 0 {
			used[match] = true
			it := p.old.nodes[olds[match]]
			p.value(olds[match], c, int(it.colon), indent, int(it.eend), true)
			insertAt = int(it.eend)
			continue
		}
		var b strings.Builder
		pad(&b, indent)
		b.WriteByte('-')
		renderAfterIndicator(&b, p.new, c, indent, true)
		p.replace(insertAt, insertAt, b.String())
	}
	for i, u := range used {
		if !u {
			it := p.old.nodes[olds[i]]
			p.replace(int(it.lstart), int(it.eend), "")
		}
	}
}
