package state

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// libraryTree reads any YAML spelling with the full YAML library and converts
// its syntax tree into our generic tree (without source spans).
func libraryTree(src string, firstLine int) (*tree, int32, error) {
	f, err := parser.ParseBytes([]byte(src), 0)
	if err != nil {
		return nil, 0, &yamlError{msg: err.Error(), lineOffset: firstLine - 1}
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	if len(docs) != 1 {
		return nil, 0, &yamlError{msg: fmt.Sprintf("the frontmatter must hold exactly one YAML document, found %d", len(docs))}
	}
	c := &converter{t: newTree(src, 64), anchors: map[string]ast.Node{}, lineOffset: int32(firstLine - 1)}
	root, err := c.node(docs[0].Body, 0)
	if err != nil {
		return nil, 0, err
	}
	return c.t, root, nil
}

type yamlError struct {
	msg        string
	line       int
	lineOffset int
}

func (e *yamlError) Error() string { return e.msg }

type converter struct {
	t          *tree
	anchors    map[string]ast.Node
	lineOffset int32
	aliases    int
}

func (c *converter) line(n ast.Node) int32 {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return int32(tk.Position.Line) + c.lineOffset
	}
	return 0
}

func (c *converter) node(n ast.Node, depth int) (int32, error) {
	if depth > 200 {
		return 0, &yamlError{msg: "the YAML nests too deeply", line: int(c.line(n))}
	}
	line := c.line(n)
	switch v := n.(type) {
	case nil:
		return c.t.add(node{kind: kScalar, style: stOther, tag: tNull}), nil
	case *ast.NullNode:
		return c.t.add(node{kind: kScalar, style: stOther, tag: tNull, line: line}), nil
	case *ast.StringNode:
		return c.t.add(node{kind: kScalar, style: stOther, tag: tStr, val: v.Value, line: line}), nil
	case *ast.LiteralNode:
		return c.t.add(node{kind: kScalar, style: stOther, tag: tStr, val: v.Value.Value, line: line}), nil
	case *ast.IntegerNode:
		if raw := v.Token.Value; !isDecimalInt(raw) {
			// 010 (octal in YAML 1.1, ten in 1.2), 0x10, +5, 1_000: readers
			// disagree on these (seed defect D19), so keep the text; an
			// integer field then reports it instead of reading 010 as 8.
			return c.t.add(node{kind: kScalar, style: stOther, tag: tStr, val: raw, line: line}), nil
		}
		return c.t.add(node{kind: kScalar, style: stOther, tag: tInt, val: v.Token.Value, line: line}), nil
	case *ast.FloatNode:
		// Scalars keep their text, as the fast scanner keeps it: a string
		// field spelled 1.50 or True reads the same from both readers.
		return c.t.add(node{kind: kScalar, style: stOther, tag: tFloat, val: v.Token.Value, line: line}), nil
	case *ast.InfinityNode:
		return c.t.add(node{kind: kScalar, style: stOther, tag: tFloat, val: v.Token.Value, line: line}), nil
	case *ast.NanNode:
		return c.t.add(node{kind: kScalar, style: stOther, tag: tFloat, val: "NaN", line: line}), nil
	case *ast.BoolNode:
		return c.t.add(node{kind: kScalar, style: stOther, tag: tBool, val: v.Token.Value, line: line}), nil
	case *ast.AnchorNode:
		if v.Name != nil {
			c.anchors[v.Name.String()] = v.Value
		}
		return c.node(v.Value, depth+1)
	case *ast.AliasNode:
		name := ""
		if v.Value != nil {
			name = v.Value.String()
		}
		target, ok := c.anchors[name]
		if !ok {
			return 0, &yamlError{msg: fmt.Sprintf("unknown alias %q", name), line: int(line)}
		}
		if c.aliases++; c.aliases > 10000 {
			return 0, &yamlError{msg: "too many aliases", line: int(line)}
		}
		return c.node(target, depth+1)
	case *ast.TagNode:
		if v.Start == nil || v.Start.Value != "!!str" && v.Start.Value != "!str" {
			// The library lets a tag on an empty value swallow the lines
			// after it ("b: !x" then "c: 1" reads as b: {c: 1}); the state
			// file has no use for tags other than !!str.
			return 0, &yamlError{msg: "YAML tags other than !!str are not supported in the state file", line: int(line)}
		}
		id, err := c.node(v.Value, depth+1)
		if err != nil {
			return 0, err
		}
		if v.Start != nil && (v.Start.Value == "!!str" || v.Start.Value == "!str") && c.t.nodes[id].kind == kScalar {
			c.t.nodes[id].tag = tStr
			if tk := v.Value.GetToken(); tk != nil {
				c.t.nodes[id].val = tk.Value
			}
		}
		return id, nil
	case *ast.MappingKeyNode:
		return c.node(v.Value, depth+1)
	case *ast.MappingValueNode:
		m := c.t.add(node{kind: kMap, style: stOther, line: line})
		if err := c.entry(m, v, depth, &keySet{}); err != nil {
			return 0, err
		}
		return m, nil
	case *ast.MappingNode:
		m := c.t.add(node{kind: kMap, style: stOther, line: line})
		keys := &keySet{}
		for _, mv := range v.Values {
			if err := c.entry(m, mv, depth, keys); err != nil {
				return 0, err
			}
		}
		return m, nil
	case *ast.SequenceNode:
		q := c.t.add(node{kind: kSeq, style: stOther, line: line})
		for _, it := range v.Values {
			id, err := c.node(it, depth+1)
			if err != nil {
				return 0, err
			}
			c.t.appendChild(q, id)
		}
		return q, nil
	case *ast.CommentGroupNode, *ast.CommentNode:
		return c.t.add(node{kind: kScalar, style: stOther, tag: tNull, line: line}), nil
	default:
		return 0, &yamlError{msg: fmt.Sprintf("unsupported YAML construct %s", n.Type()), line: int(line)}
	}
}

func (c *converter) entry(m int32, mv *ast.MappingValueNode, depth int, keys *keySet) error {
	if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
		return &yamlError{msg: "merge keys (<<) are not supported in the state file", line: int(c.line(mv))}
	}
	k, err := c.node(mv.Key, depth+1)
	if err != nil {
		return err
	}
	if c.t.nodes[k].kind != kScalar {
		return &yamlError{msg: "a mapping key must be a scalar", line: int(c.line(mv.Key))}
	}
	key := c.t.nodes[k].val
	if !keys.add(c.t, m, key) {
		return &yamlError{msg: fmt.Sprintf("duplicate key %q", key), line: int(c.line(mv.Key))}
	}
	v, err := c.node(mv.Value, depth+1)
	if err != nil {
		return err
	}
	c.t.appendChild(m, k)
	c.t.nodes[k].next = v
	c.t.nodes[m].last = v
	return nil
}

// isDecimalInt reports whether s is a plain decimal integer without a
// leading zero, the only integer spelling every YAML reader agrees on.
func isDecimalInt(s string) bool {
	if strings.HasPrefix(s, "-") {
		s = s[1:]
	}
	return isDigits(s) && (len(s) == 1 || s[0] != '0')
}
