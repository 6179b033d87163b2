package state

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// document is the source a State was read from, kept so that a write can
// change only what the operation changed.
type document struct {
	bom      bool
	crlf     bool
	raw      string // the file as read
	head     string // the opening fence line
	tail     string // the closing fence line, as written ("---\n", "--- \n", or "---" at the end)
	fm       string // the frontmatter text, LF line endings
	t        *tree
	root     int32
	snap     *State // the state as read, to find what changed
	errors   []Issue
	warnings []Issue
}

// ParseError is a state file that cannot be read at all.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteByte(':')
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString(e.Msg)
	return b.String()
}

var fence = "---"

// Parse reads a state file's bytes. Problems of the YAML itself (no
// frontmatter, a syntax error) are a *ParseError; problems of the contract
// (a wrong type, a missing field) are reported by Validate.
func Parse(data []byte) (*State, error) {
	d, body, err := split(string(data))
	if err != nil {
		return nil, err
	}
	t, root, err := readTree(d.fm, 2, strings.Count(d.fm, "\n"))
	if err != nil {
		return nil, yamlParseError(err)
	}
	d.t, d.root = t, root
	dec := &decoder{t: t}
	s := dec.decode(root)
	s.Body = body
	d.errors, d.warnings = dec.errors, dec.warnings
	d.snap = s.clone()
	s.doc = d
	return s, nil
}

// readTree is the general reader of a frontmatter of about lines lines that
// starts at line firstLine of the file: the fast scanner, and the YAML
// library for a layout outside the scanner's (anchors, tags, multi-line flow
// collections, ...), which people may write by hand.
func readTree(src string, firstLine, lines int) (*tree, int32, error) {
	t, root, err := scanTreeSized(src, firstLine, lines)
	if err == nil {
		return t, root, nil
	}
	return libraryTree(src, firstLine)
}

// split cuts a state file into its fences, frontmatter (LF line endings)
// and body.
func split(text string) (*document, string, error) {
	d := &document{raw: text}
	if strings.HasPrefix(text, "\uFEFF") {
		d.bom = true
		text = text[3:]
	}
	firstEnd := strings.IndexByte(text, '\n')
	if firstEnd > 0 && text[firstEnd-1] == '\r' {
		d.crlf = true
		text = strings.ReplaceAll(text, "\r\n", "\n")
		firstEnd = strings.IndexByte(text, '\n')
	}
	if firstEnd < 0 || strings.TrimRight(text[:firstEnd], " \t") != fence {
		return nil, "", &ParseError{Line: 1, Msg: "missing frontmatter: the file must start with a '---' line"}
	}
	d.head = text[:firstEnd+1]
	rest := text[firstEnd+1:]
	fmEnd, bodyStart := -1, -1
	for p := 0; p < len(rest); {
		// Only a line that starts with the fence can close the frontmatter.
		if strings.HasPrefix(rest[p:], fence) {
			e := strings.IndexByte(rest[p:], '\n')
			line := rest[p:]
			next := len(rest)
			if e >= 0 {
				line = rest[p : p+e]
				next = p + e + 1
			}
			if strings.TrimRight(line, " \t") == fence {
				fmEnd, bodyStart = p, next
				break
			}
		}
		i := strings.Index(rest[p:], "\n"+fence)
		if i < 0 {
			break
		}
		p += i + 1
	}
	if fmEnd < 0 {
		return nil, "", &ParseError{Line: 1, Msg: "unterminated frontmatter: no closing '---' line"}
	}
	d.fm = rest[:fmEnd]
	d.tail = rest[fmEnd:bodyStart]
	if strings.TrimSpace(d.fm) == "" {
		return nil, "", &ParseError{Line: 2, Msg: "empty frontmatter"}
	}
	return d, rest[bodyStart:], nil
}

// yamlPos is the library's "[line:column]" prefix, compiled on first use:
// every command links this package, few meet a YAML syntax error.
var yamlPos = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[(\d+):(\d+)\]\s*`) })

func yamlParseError(err error) error {
	ye, ok := err.(*yamlError)
	if !ok {
		return &ParseError{Msg: err.Error()}
	}
	msg, line := ye.msg, ye.line
	if m := yamlPos().FindStringSubmatch(msg); m != nil {
		l, _ := strconv.Atoi(m[1])
		line = l + ye.lineOffset
		msg = msg[len(m[0]):]
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return &ParseError{Line: line, Msg: "invalid YAML: " + strings.TrimSpace(msg)}
}

// Marshal renders the state: a state read from a file keeps every byte that
// the change did not touch; a new state is written in the canonical layout.
func Marshal(s *State) []byte {
	var out string
	if s.doc == nil {
		out = "---\n" + renderAll(s, nil, 0, nil) + "---\n" + s.Body
	} else if d := s.doc; unchanged(d, s) {
		out = d.raw // byte for byte, whatever its layout or line endings
	} else if !d.crlf && !d.bom {
		// The common case, built in one buffer: at 100,000 atoms every copy
		// of the file costs milliseconds.
		buf := make([]byte, 0, len(d.raw)+4096)
		buf = append(buf, d.head...)
		buf = patchFrontmatter(buf, s)
		buf = append(buf, d.tail...)
		return append(buf, s.Body...)
	} else {
		out = d.head + string(patchFrontmatter(nil, s)) + d.tail + s.Body
		if d.crlf {
			out = strings.ReplaceAll(out, "\n", "\r\n")
		}
		if d.bom {
			out = "\uFEFF" + out
		}
	}
	return []byte(out)
}

// unchanged reports whether s still holds what was read into it.
func unchanged(d *document, s *State) bool {
	if s.Body != d.snap.Body {
		return false
	}
	for _, name := range sectionNames {
		if !sectionSame(d.snap, s, name) {
			return false
		}
	}
	return true
}

// renderAll renders every section canonically; with an old tree, keys that
// other tools added are kept.
func renderAll(s *State, old *tree, oldRoot int32, sections []string) string {
	e := newEncoder()
	root := e.mapOf(ownNone)
	for _, name := range sectionNames {
		e.t.set(root, name, e.section(s, name))
	}
	if old != nil {
		p := &patcher{old: old, new: e.t}
		p.keepUnknown(oldRoot, root)
	}
	var b strings.Builder
	for k := e.t.nodes[root].first; k != 0; k = e.t.nodes[e.t.nodes[k].next].next {
		switch e.t.nodes[k].val {
		case "control", "atoms", "decompositions":
			b.WriteByte('\n')
		}
		renderEntry(&b, e.t, k, 0)
	}
	return b.String()
}

func patchFrontmatter(buf []byte, s *State) []byte {
	d := s.doc
	old := d.t
	e := newEncoder()
	p := &patcher{old: old, new: e.t}
	spans := topLevelSpans(d)
	if spans == nil {
		return append(buf, renderAll(s, old, d.root, nil)...)
	}
	var added strings.Builder
	for _, name := range sectionNames {
		if sectionSame(d.snap, s, name) {
			continue
		}
		k, v := old.mapGet(d.root, name)
		if k == 0 {
			if !sectionEmpty(s, name) {
				nk := e.t.scalar(name, tStr)
				e.t.nodes[nk].next = e.section(s, name)
				renderEntry(&added, e.t, nk, 0)
			}
			continue
		}
		if !old.spans {
			sp := spans[name]
			nv := e.section(s, name)
			p.keepUnknown(v, nv)
			nk := e.t.scalar(name, tStr)
			e.t.nodes[nk].next = nv
			var b strings.Builder
			renderEntry(&b, e.t, nk, 0)
			p.replace(sp[0], sp[1], b.String())
			continue
		}
		kn := old.nodes[k]
		switch {
		case name == "atoms" && p.atomsDiff(v, d.snap.Atoms, s.Atoms, e):
		case name == "bindings" && p.bindingsDiff(v, d.snap.Bindings, s.Bindings, e):
		default:
			p.value(v, e.section(s, name), int(kn.colon), 0, int(kn.eend), false)
		}
	}
	fm := d.fm
	if added.Len() > 0 {
		if fm != "" && !strings.HasSuffix(fm, "\n") {
			fm += "\n"
		}
		p.replace(len(d.fm), len(d.fm), added.String())
		if !strings.HasSuffix(d.fm, "\n") {
			p.replace(len(d.fm), len(d.fm), "\n")
		}
	}
	return appendEdits(buf, d.fm, p.edits)
}

// topLevelSpans finds the byte range of each top-level section. With the fast
// scanner's tree these are the entries' spans; for a tree from the YAML
// library they come from the column-0 keys, and nil means the layout is not
// a block mapping at the top (then the whole frontmatter is rewritten).
func topLevelSpans(d *document) map[string][2]int {
	if d.t.nodes[d.root].kind != kMap {
		return nil
	}
	out := map[string][2]int{}
	if d.t.spans {
		return out
	}
	var keys []string
	var starts []int
	fm := d.fm
	for p := 0; p < len(fm); {
		e := strings.IndexByte(fm[p:], '\n')
		next := len(fm)
		if e >= 0 {
			next = p + e + 1
		}
		line := fm[p:next]
		if len(line) > 0 && line[0] != ' ' && line[0] != '#' && line[0] != '\n' {
			c := strings.Index(line, ":")
			if c <= 0 {
				return nil
			}
			keys = append(keys, strings.Trim(line[:c], `"'`))
			starts = append(starts, p)
		}
		p = next
	}
	var treeKeys []string
	for k := d.t.nodes[d.root].first; k != 0; k = d.t.nodes[d.t.nodes[k].next].next {
		treeKeys = append(treeKeys, d.t.nodes[k].val)
	}
	if !reflect.DeepEqual(keys, treeKeys) {
		return nil
	}
	for i, k := range keys {
		end := len(fm)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		out[k] = [2]int{starts[i], end}
	}
	return out
}

func sectionEmpty(s *State, name string) bool {
	switch name {
	case "decompositions":
		return len(s.Decompositions) == 0
	case "or_groups":
		return len(s.ORGroups) == 0
	case "bindings":
		return len(s.Bindings) == 0
	case "trail":
		return len(s.Trail) == 0
	case "corrections":
		return len(s.Corrections) == 0
	}
	return false
}

func sectionSame(a, b *State, name string) bool {
	switch name {
	case "objective":
		return reflect.DeepEqual(a.Objective, b.Objective)
	case "control":
		return reflect.DeepEqual(a.Control, b.Control)
	case "atoms":
		if len(a.Atoms) != len(b.Atoms) {
			return false
		}
		for i := range a.Atoms {
			if !atomSame(&a.Atoms[i], &b.Atoms[i]) {
				return false
			}
		}
		return true
	case "decompositions":
		return reflect.DeepEqual(a.Decompositions, b.Decompositions)
	case "or_groups":
		return reflect.DeepEqual(a.ORGroups, b.ORGroups)
	case "bindings":
		if len(a.Bindings) != len(b.Bindings) {
			return false
		}
		for i := range a.Bindings {
			if !bindingSame(&a.Bindings[i], &b.Bindings[i]) {
				return false
			}
		}
		return true
	case "trail":
		return reflect.DeepEqual(a.Trail, b.Trail)
	case "corrections":
		return reflect.DeepEqual(a.Corrections, b.Corrections)
	}
	return false
}

func atomSame(a, b *Atom) bool {
	return sameFields(atomFields, unsafe.Pointer(a), unsafe.Pointer(b))
}

func bindingSame(a, b *Binding) bool {
	return a.AtomID == b.AtomID && sameFields(bindingFields, unsafe.Pointer(a), unsafe.Pointer(b))
}

func stringsSame(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// atomsDiff patches the atoms list atom by atom without building the tree of
// unchanged atoms; false when the list is not a block list of the same atoms.
func (p *patcher) atomsDiff(seq int32, old, cur []Atom, e *encoder) bool {
	sn := p.old.nodes[seq]
	if sn.kind != kSeq || sn.style != stBlock || len(cur) == 0 {
		return false
	}
	items := make([]int32, 0, len(old))
	for c := sn.first; c != 0; c = p.old.nodes[c].next {
		items = append(items, c)
	}
	if len(items) != len(old) {
		return false
	}
	byID := make(map[string]int, len(old))
	for i := range old {
		if _, dup := byID[old[i].ID]; !dup {
			byID[old[i].ID] = i
		}
	}
	used := make([]bool, len(old))
	indent := int(sn.indent)
	insertAt := int(p.old.nodes[items[0]].lstart)
	for i := range cur {
		a := &cur[i]
		if j, ok := byID[a.ID]; ok && !used[j] {
			used[j] = true
			it := p.old.nodes[items[j]]
			if !atomSame(&old[j], a) {
				p.value(items[j], e.atom(a), int(it.colon), indent, int(it.eend), true)
			}
			insertAt = int(it.eend)
			continue
		}
		var b strings.Builder
		pad(&b, indent)
		b.WriteByte('-')
		renderAfterIndicator(&b, e.t, e.atom(a), indent, true)
		p.replace(insertAt, insertAt, b.String())
	}
	for j, u := range used {
		if !u {
			it := p.old.nodes[items[j]]
			p.replace(int(it.lstart), int(it.eend), "")
		}
	}
	return true
}

// bindingsDiff patches the bindings mapping binding by binding.
func (p *patcher) bindingsDiff(m int32, old, cur []Binding, e *encoder) bool {
	mn := p.old.nodes[m]
	if mn.kind != kMap || mn.style != stBlock || len(cur) == 0 {
		return false
	}
	curByID := make(map[string]int, len(cur))
	for i := range cur {
		curByID[cur[i].AtomID] = i
	}
	oldByID := make(map[string]int, len(old))
	for i := range old {
		oldByID[old[i].AtomID] = i
	}
	indent := int(mn.indent)
	i := 0
	for k := mn.first; k != 0; k = p.old.nodes[p.old.nodes[k].next].next {
		kn := p.old.nodes[k]
		if i >= len(old) || old[i].AtomID != kn.val {
			return false
		}
		if j, ok := curByID[kn.val]; !ok {
			p.replace(int(kn.lstart), int(kn.eend), "")
		} else if !bindingSame(&old[i], &cur[j]) {
			p.value(kn.next, e.binding(&cur[j]), int(kn.colon), indent, int(kn.eend), false)
		}
		i++
	}
	var b strings.Builder
	for j := range cur {
		if _, ok := oldByID[cur[j].AtomID]; !ok {
			pad(&b, indent)
			b.WriteString(renderKey(cur[j].AtomID))
			b.WriteByte(':')
			renderAfterIndicator(&b, e.t, e.binding(&cur[j]), indent, false)
		}
	}
	if b.Len() > 0 {
		p.replace(int(mn.end), int(mn.end), b.String())
	}
	return true
}

// Issues returns the contract problems found while reading (types, missing fields).
func (s *State) readIssues() (errs, warns []Issue) {
	if s.doc == nil {
		return nil, nil
	}
	return s.doc.errors, s.doc.warnings
}

// clone returns a deep copy of s without its document.
func (s *State) clone() *State {
	c := s.snapshot()
	for i := range c.Atoms {
		deepenFields(atomFields, unsafe.Pointer(&c.Atoms[i]))
	}
	for i := range c.Bindings {
		deepenFields(bindingFields, unsafe.Pointer(&c.Bindings[i]))
	}
	return c
}

// snapshot is clone but for the lists of atoms and bindings (depends_on,
// scope, artifacts), which it shares with s: enough to tell later whether
// an atom or binding was changed, or one of those lists replaced.
func (s *State) snapshot() *State {
	c := *s
	c.doc = nil
	c.Objective.BaseCase = cloneBaseCase(s.Objective.BaseCase)
	deepenFields(controlFields, unsafe.Pointer(&c.Control))
	// Copies keep nil apart from empty: the snapshot taken at read time must
	// compare equal to an unchanged state, or a write would rewrite sections
	// that did not change (a "failed: []" read by the YAML library).
	c.Atoms = copySlice(s.Atoms)
	c.Decompositions = copySlice(s.Decompositions)
	for i := range c.Decompositions {
		deepenFields(decompositionFields, unsafe.Pointer(&c.Decompositions[i]))
	}
	c.ORGroups = copySlice(s.ORGroups)
	for i := range c.ORGroups {
		deepenFields(orGroupFields, unsafe.Pointer(&c.ORGroups[i]))
	}
	c.Bindings = copySlice(s.Bindings)
	c.Trail = copySlice(s.Trail)
	for i := range c.Trail {
		deepenFields(trailFields, unsafe.Pointer(&c.Trail[i]))
	}
	c.Corrections = copySlice(s.Corrections)
	for i := range c.Corrections {
		deepenFields(correctionFields, unsafe.Pointer(&c.Corrections[i]))
	}
	return &c
}

// copySlice copies s; nil stays nil and empty stays empty.
func copySlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func cloneBaseCase(b *BaseCase) *BaseCase {
	if b == nil {
		return nil
	}
	c := *b
	if b.Legacy != nil {
		l := cloneCheck(*b.Legacy)
		c.Legacy = &l
	}
	c.Checklist = cloneItems(b.Checklist)
	return &c
}

func cloneItems(items []ChecklistItem) []ChecklistItem {
	if items == nil {
		return nil
	}
	out := make([]ChecklistItem, len(items))
	for i, it := range items {
		out[i] = it
		if it.Check != nil {
			ck := cloneCheck(*it.Check)
			out[i].Check = &ck
		}
		out[i].Group = cloneItems(it.Group)
		out[i].AnyOf = cloneItems(it.AnyOf)
	}
	return out
}

func cloneCheck(c Check) Check {
	if c.PassThreshold != nil {
		v := *c.PassThreshold
		c.PassThreshold = &v
	}
	c.Rubric = copySlice(c.Rubric)
	for i := range c.Rubric {
		c.Rubric[i].Levels = copySlice(c.Rubric[i].Levels)
	}
	return c
}

// Equal reports whether two states hold the same contract data (lines and
// source aside); tests use it to compare the two readers.
func Equal(a, b *State) bool {
	ca, cb := a.clone(), b.clone()
	clearLines(ca)
	clearLines(cb)
	return reflect.DeepEqual(ca, cb)
}

// clearLines also treats empty lists like absent ones, except depends_on.
func clearLines(s *State) {
	for i := range s.Atoms {
		s.Atoms[i].Line = 0
	}
	for i := range s.Decompositions {
		s.Decompositions[i].Line = 0
		s.Decompositions[i].Children = nilIfEmpty(s.Decompositions[i].Children)
	}
	for i := range s.ORGroups {
		s.ORGroups[i].Line = 0
		s.ORGroups[i].Choices = nilIfEmpty(s.ORGroups[i].Choices)
		s.ORGroups[i].Failed = nilIfEmpty(s.ORGroups[i].Failed)
	}
	for i := range s.Bindings {
		s.Bindings[i].Line = 0
		s.Bindings[i].Artifacts = nilIfEmpty(s.Bindings[i].Artifacts)
	}
	s.Atoms = nilIfEmpty(s.Atoms)
	s.Decompositions = nilIfEmpty(s.Decompositions)
	s.ORGroups = nilIfEmpty(s.ORGroups)
	s.Bindings = nilIfEmpty(s.Bindings)
	s.Trail = nilIfEmpty(s.Trail)
	s.Corrections = nilIfEmpty(s.Corrections)
	if s.Objective.BaseCase != nil {
		if s.Objective.BaseCase.Legacy != nil {
			s.Objective.BaseCase.Legacy.Line = 0
		}
		clearItemLines(s.Objective.BaseCase.Checklist)
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func clearItemLines(items []ChecklistItem) {
	for i := range items {
		items[i].Line = 0
		if c := items[i].Check; c != nil {
			c.Line = 0
			c.Rubric = nilIfEmpty(c.Rubric)
			for j := range c.Rubric {
				c.Rubric[j].Levels = nilIfEmpty(c.Rubric[j].Levels)
			}
		}
		clearItemLines(items[i].Group)
		clearItemLines(items[i].AnyOf)
	}
}

var _ = bytes.Equal
var _ = fmt.Sprint

// parseWith is Parse with a chosen reader, for tests that compare readers.
func parseWith(data []byte, read func(string, int) (*tree, int32, error)) (*State, error) {
	s, err := Parse(data)
	if err != nil {
		return nil, err
	}
	t, root, err := read(s.doc.fm, 2)
	if err != nil {
		return nil, yamlParseError(err)
	}
	dec := &decoder{t: t}
	r := dec.decode(root)
	r.Body = s.Body
	return r, nil
}

// Clone returns a deep copy of the state's contract data, detached from the
// file it was read from (writing it renders the canonical layout).
func Clone(s *State) *State { return s.clone() }

// CopyInto replaces dst's contract data with src's, keeping what dst knows
// of its source file, so that a write of dst changes only what differs.
// dst shares src's slices afterwards.
func CopyInto(dst, src *State) {
	doc := dst.doc
	*dst = *src
	dst.doc = doc
}
