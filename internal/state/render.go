package state

import (
	"strconv"
	"strings"
)

// Canonical rendering: 2-space indentation, block mappings, sequences of
// mappings as block lists, sequences of scalars as one-line flow lists, free
// text double-quoted, identifiers plain when that reads back the same.

func quote(s string) string { return strconv.Quote(strings.ToValidUTF8(s, "\uFFFD")) }

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isPlainKeyByte(s[i]) {
			return false
		}
	}
	return s[0] != '-' && s[0] != '.'
}

func renderKey(k string) string {
	if isIdent(k) {
		if tg, ok := plainTag(k); ok && (tg == tStr || tg == tInt) {
			return k
		}
	}
	return quote(k)
}

func renderScalar(t *tree, n int32) string {
	nd := &t.nodes[n]
	switch nd.tag {
	case tNull:
		return "null"
	case tBool:
		if nd.val == "true" || nd.val == "True" || nd.val == "TRUE" {
			return "true"
		}
		return "false"
	case tInt, tFloat:
		if tg, ok := plainTag(nd.val); ok && tg == nd.tag {
			return nd.val
		}
		return nd.val
	}
	if nd.style != stDouble && isIdent(nd.val) {
		if tg, ok := plainTag(nd.val); ok && tg == tStr {
			return nd.val
		}
	}
	return quote(nd.val)
}

// renderInline renders scalars, empty collections and lists of scalars on one line.
func renderInline(t *tree, n int32) (string, bool) {
	nd := &t.nodes[n]
	switch nd.kind {
	case kScalar:
		return renderScalar(t, n), true
	case kMap:
		if nd.first == 0 {
			return "{}", true
		}
		return "", false
	}
	if nd.first == 0 {
		return "[]", true
	}
	var b strings.Builder
	b.WriteByte('[')
	for c := nd.first; c != 0; c = t.nodes[c].next {
		if t.nodes[c].kind != kScalar {
			return "", false
		}
		if c != nd.first {
			b.WriteString(", ")
		}
		b.WriteString(renderScalar(t, c))
	}
	b.WriteByte(']')
	return b.String(), true
}

func pad(b *strings.Builder, n int) {
	for i := 0; i < n; i++ {
		b.WriteByte(' ')
	}
}

// renderAfterIndicator renders a value that follows "key:" or "-" at column
// indent: " inline\n" or "\n" and the block below.
func renderAfterIndicator(b *strings.Builder, t *tree, v int32, indent int, inSeq bool) {
	if s, ok := renderInline(t, v); ok {
		b.WriteByte(' ')
		b.WriteString(s)
		b.WriteByte('\n')
		return
	}
	nd := &t.nodes[v]
	if inSeq && nd.kind == kMap {
		// "- key: value" with the following keys aligned under the first.
		b.WriteByte(' ')
		first := true
		for k := nd.first; k != 0; k = t.nodes[t.nodes[k].next].next {
			if !first {
				pad(b, indent+2)
			}
			first = false
			renderEntry(b, t, k, indent+2)
		}
		return
	}
	b.WriteByte('\n')
	renderBlock(b, t, v, indent+2)
}

func renderEntry(b *strings.Builder, t *tree, k int32, indent int) {
	b.WriteString(renderKey(t.nodes[k].val))
	b.WriteByte(':')
	renderAfterIndicator(b, t, t.nodes[k].next, indent, false)
}

// renderBlock renders a collection as block lines at column indent.
func renderBlock(b *strings.Builder, t *tree, n int32, indent int) {
	nd := &t.nodes[n]
	if nd.kind == kMap {
		for k := nd.first; k != 0; k = t.nodes[t.nodes[k].next].next {
			pad(b, indent)
			renderEntry(b, t, k, indent)
		}
		return
	}
	for c := nd.first; c != 0; c = t.nodes[c].next {
		pad(b, indent)
		b.WriteByte('-')
		renderAfterIndicator(b, t, c, indent, true)
	}
}
