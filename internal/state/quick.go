package state

import (
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// The quick reader serves the hooks, which run on every tool call and every
// stop of a session: they read the whole state, but write at most the
// control section. In the layout aot writes, the atoms and bindings sections
// are nearly all of a large file, and every line of them has one of a few
// shapes; the quick reader decodes those two sections line by line straight
// into atoms and bindings, through the same field tables as the tree decoder
// (fields.go), without the node tree a write of them would need,
// and reads the rest of the frontmatter as Parse does, with those sections
// replaced by empty ones of the same number of lines (so that every line
// number stays the same). A section in any other layout is left to the
// general reader. Tests check that the result equals Parse's.

// quickDoc is what the quick reader keeps of a file to patch its control
// section.
type quickDoc struct {
	d       *document // the file; its tree is that of mini
	mini    string    // the frontmatter with the quick sections emptied
	quickAt int       // offset of the first emptied section (len(fm) if none)
}

// parseQuick reads data as Parse does; the state has no document (it is for
// reading, or for UpdateControl), and errs and warns are the problems found
// while reading, which Validate would report. The state's strings share
// data's memory (copying a large file costs more than reading it): data
// must not change afterwards.
func parseQuick(data []byte) (s *State, q *quickDoc, errs, warns []Issue, err error) {
	if len(data) == 0 {
		return quickFallback(data)
	}
	d, body, err := split(unsafe.String(&data[0], len(data)))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if d.bom || d.crlf || !utf8.ValidString(d.fm) {
		return quickFallback(data)
	}
	var atoms []Atom
	var bindings []Binding
	var mini strings.Builder
	var lists arena
	quickAt := len(d.fm)
	written := 0 // lines of mini that are not blank, at most
	fm := d.fm
	line := 2 // the file line of fm's first line
	for p := 0; p < len(fm); {
		// A quick section finds its own end on the way.
		size, lines := 0, 0
		switch rest := fm[p:]; {
		case strings.HasPrefix(rest, "atoms:\n") && atoms == nil:
			atoms, size, lines = quickAtoms(rest[len("atoms:\n"):], line+1, &lists)
			if atoms != nil {
				mini.WriteString("atoms: []\n")
			}
		case strings.HasPrefix(rest, "bindings:\n") && bindings == nil:
			bindings, size, lines = quickBindings(rest[len("bindings:\n"):], line+1, &lists)
			if bindings != nil {
				mini.WriteString("bindings: {}\n")
			}
		}
		if size > 0 {
			for range lines {
				mini.WriteByte('\n')
			}
			quickAt = min(quickAt, p)
			written++
			end := p + strings.IndexByte(fm[p:], '\n') + 1 + size
			line += 1 + lines
			p = end
			continue
		}
		end := nextTopLevel(fm, p)
		sec := fm[p:end]
		lines = strings.Count(sec, "\n")
		mini.WriteString(sec)
		written += lines
		line += lines
		p = end
	}
	if atoms == nil && bindings == nil {
		return quickFallback(data)
	}
	t, root, err := readTree(mini.String(), 2, written)
	if err != nil {
		return quickFallback(data) // for Parse's error, in the file's own lines
	}
	d.t, d.root = t, root
	dec := &decoder{t: t}
	s = dec.decode(root)
	s.Body = body
	if atoms != nil {
		s.Atoms = atoms
	}
	if bindings != nil {
		s.Bindings = bindings
	}
	return s, &quickDoc{d: d, mini: mini.String(), quickAt: quickAt}, dec.errors, dec.warnings, nil
}

// quickFallback reads data with Parse, for a file outside the quick layout.
func quickFallback(data []byte) (*State, *quickDoc, []Issue, []Issue, error) {
	s, err := Parse(data)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	errs, warns := s.readIssues()
	s.doc = nil
	return s, nil, errs, warns, nil
}

// nextTopLevel returns the start of the first line after the one at p that
// starts a top-level entry (no indentation, not a comment), or len(fm).
func nextTopLevel(fm string, p int) int {
	for {
		e := strings.IndexByte(fm[p:], '\n')
		if e < 0 {
			return len(fm)
		}
		p += e + 1
		if p < len(fm) && fm[p] != ' ' && fm[p] != '\n' && fm[p] != '#' {
			return p
		}
	}
}

// sectionLines calls fn for each line of a section's body (without its
// newline) up to the next top-level entry, and returns the size of the body
// and its number of lines; ok is false when fn refuses a line, a blank line
// sits between two others, or a comment starts at the left margin.
func sectionLines(body string, fn func(l string) bool) (size, lines int, ok bool) {
	trailing := false
	p := 0
	for p < len(body) {
		if c := body[p]; c != ' ' && c != '\n' {
			if c == '#' {
				return 0, 0, false
			}
			break // the next top-level entry
		}
		e := strings.IndexByte(body[p:], '\n')
		if e < 0 {
			return 0, 0, false // a frontmatter always ends with a newline
		}
		l := body[p : p+e]
		p += e + 1
		lines++
		if l == "" {
			trailing = true
			continue
		}
		if trailing || !fn(l) {
			return 0, 0, false
		}
	}
	return p, lines, true
}

// quickRecord reads the fields of one record (an atom, a binding) from
// lines of "    key: value" in the order of its table, as aot writes them.
type quickRecord struct {
	fields []field
	lead   int // the first lead fields are always written
	p      unsafe.Pointer
	next   int // index in fields of the next key allowed
}

func newQuickRecord(fields []field) quickRecord {
	return quickRecord{fields: fields, lead: leadingWritten(fields)}
}

// start begins the record at p; its fields from..lead-1 are still to come.
func (r *quickRecord) start(p unsafe.Pointer, from int) { r.p, r.next = p, from }

// done reports whether the current record, if any, has all its always
// written fields.
func (r *quickRecord) done() bool { return r.p == nil || r.next >= r.lead }

// line reads one "    key: value" line (without its indentation) of the
// record: false for a key that is unknown, repeated, out of order or skips
// one always written, or a value in another layout.
func (r *quickRecord) line(rest string, lists *arena) bool {
	for k := r.next; k < len(r.fields); k++ {
		f := &r.fields[k]
		if len(rest) > len(f.key)+1 && rest[:len(f.key)] == f.key && rest[len(f.key)] == ':' && rest[len(f.key)+1] == ' ' {
			if k > r.next && r.next < r.lead {
				return false // an always written key is missing
			}
			r.next = k + 1
			return f.quick(rest[len(f.key)+2:], r.p, lists)
		}
	}
	return false
}

// quickAtoms decodes the body of the atoms section (the text after its
// "atoms:" line) when every atom is in the layout aot writes; line is the
// file line of its first line. It returns nil when it cannot, else the atoms
// and the size and lines of the body (as sectionLines). An atom starts with
// its first field on the dash line ("  - id: A1").
func quickAtoms(body string, line int, lists *arena) ([]Atom, int, int) {
	const field = "    "
	item := "  - " + atomFields[0].key + ": "
	atoms := make([]Atom, 0, strings.Count(body, "\n"+item)+1)
	r := newQuickRecord(atomFields)
	n := line - 1
	size, lines, ok := sectionLines(body, func(l string) bool {
		n++
		switch {
		case strings.HasPrefix(l, item):
			if !r.done() {
				return false
			}
			atoms = append(atoms, Atom{Line: n})
			r.start(unsafe.Pointer(&atoms[len(atoms)-1]), 1)
			return atomFields[0].quick(l[len(item):], r.p, lists)
		case r.p != nil && strings.HasPrefix(l, field):
			return r.line(l[len(field):], lists)
		}
		return false
	})
	if !ok || !r.done() || len(atoms) == 0 {
		return nil, 0, 0
	}
	return atoms, size, lines
}

// quickBindings is quickAtoms for the bindings section: each binding is
// "  ID:" and its fields.
func quickBindings(body string, line int, lists *arena) ([]Binding, int, int) {
	const field = "    "
	bindings := make([]Binding, 0, strings.Count(body, ":\n"))
	seen := make(map[string]bool, cap(bindings))
	r := newQuickRecord(bindingFields)
	n := line - 1
	size, lines, ok := sectionLines(body, func(l string) bool {
		n++
		if strings.HasPrefix(l, field) {
			return r.p != nil && r.line(l[len(field):], lists)
		}
		if !r.done() {
			return false
		}
		id, ok := quickKey(l)
		if !ok || seen[id] {
			return false // a duplicate key: the general reader reports it
		}
		seen[id] = true
		bindings = append(bindings, Binding{AtomID: id, Line: n})
		r.start(unsafe.Pointer(&bindings[len(bindings)-1]), 0)
		return true
	})
	if !ok || !r.done() || len(bindings) == 0 {
		return nil, 0, 0
	}
	for i := range bindings {
		if bindings[i].Artifacts == nil {
			bindings[i].Artifacts = []string{} // as the general reader reads a binding
		}
	}
	return bindings, size, lines
}

// quickKey reads "  KEY:" of a binding, with a plain or double-quoted key,
// as the fast scanner reads keys.
func quickKey(l string) (string, bool) {
	if !strings.HasPrefix(l, "  ") || !strings.HasSuffix(l, ":") || len(l) < 4 || l[2] == ' ' {
		return "", false
	}
	k := l[2 : len(l)-1]
	if k[0] == '"' {
		v, j, err := parseDouble(k, 0, len(k))
		return v, err == nil && j == len(k)
	}
	if k[0] == '-' || k[0] == '.' {
		return "", false
	}
	for i := 0; i < len(k); i++ {
		if !isPlainKeyByte(k[i]) {
			return "", false
		}
	}
	tg, ok := plainTag(k)
	return k, ok && (tg == tStr || tg == tInt)
}

// quickScalar reads a whole value that is a double-quoted or plain string.
func quickScalar(v string) (string, bool) {
	if v == "" {
		return "", false
	}
	if v[0] == '"' {
		s, j, err := parseDouble(v, 0, len(v))
		return s, err == nil && j == len(v)
	}
	if plainEnd(v, 0, len(v)) != len(v) {
		return "", false // a comment or trailing spaces
	}
	tg, ok := plainTag(v)
	return v, ok && tg == tStr
}

// arena hands out the lists of many atoms from a few large arrays.
type arena struct{ buf []string }

// list reads a whole value that is a one-line flow list of strings.
func (ar *arena) list(v string) ([]string, bool) {
	if len(v) < 2 || v[0] != '[' || v[len(v)-1] != ']' {
		return nil, false
	}
	if cap(ar.buf)-len(ar.buf) < len(v)/2 {
		ar.buf = make([]string, 0, max(4096, len(v)))
	}
	start := len(ar.buf)
	inner := v[1 : len(v)-1]
	if strings.TrimLeft(inner, " ") == "" {
		return []string{}, true
	}
	for len(inner) > 0 {
		inner = strings.TrimLeft(inner, " ")
		var item string
		if inner != "" && inner[0] == '"' {
			s, j, err := parseDouble(inner, 0, len(inner))
			if err != nil {
				return nil, false
			}
			item, inner = s, inner[j:]
		} else {
			j := strings.IndexByte(inner, ',')
			if j < 0 {
				j = len(inner)
			}
			item = strings.TrimRight(inner[:j], " ")
			inner = inner[len(item):]
			if item == "" || strings.ContainsAny(item, " #]") {
				return nil, false
			}
			if tg, ok := plainTag(item); !ok || tg != tStr {
				return nil, false
			}
		}
		ar.buf = append(ar.buf, item)
		inner = strings.TrimLeft(inner, " ")
		if inner == "" {
			break
		}
		if inner[0] != ',' {
			return nil, false
		}
		inner = inner[1:]
		if strings.TrimLeft(inner, " ") == "" {
			return nil, false // a trailing comma: left to the general reader
		}
	}
	return ar.buf[start:len(ar.buf):len(ar.buf)], true
}

// quickBool reads a plain true or false.
func quickBool(v string) (bool, bool) {
	if tg, ok := plainTag(v); ok && tg == tBool {
		return v == "true" || v == "True" || v == "TRUE", true
	}
	return false, false
}

// quickInt reads a plain integer.
func quickInt(v string) (int, bool) {
	if tg, ok := plainTag(v); ok && tg == tInt {
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}
