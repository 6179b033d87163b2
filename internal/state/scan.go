package state

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The fast scanner reads the block layout that aot writes and that people
// usually write by hand: block mappings and sequences indented with spaces,
// plain, quoted and block scalars, one-line flow lists and comments anywhere.
// It records the source span of every node so that a write can replace only
// the bytes of what changed. Anything outside that subset (anchors, tags,
// multi-line flow collections or quoted scalars, ambiguous plain scalars...)
// makes it give up with errUnsupported; the full YAML library then reads the
// file. Tests and a fuzz target check that both readers agree.

var errUnsupported = errors.New("outside the fast layout")

const maxDepth = 100

type scanner struct {
	src   string
	pos   int // offset of the current line's start
	line  int // 1-based line number of the current line within src
	first int // line number of src's first line in the file
	t     *tree
	depth int
	// lastKeyEnd is the entry end of the map key parsed last.
	lastKeyEnd int32
}

func scanTree(src string, firstLine int) (*tree, int32, error) {
	// About three nodes a line in the layout aot writes (key, value, and a
	// list item or flow entry); a low guess regrows, and copies, a slice of
	// over 100 MB at 100,000 atoms.
	return scanTreeSized(src, firstLine, strings.Count(src, "\n"))
}

// scanTreeSized is scanTree of a text of about lines lines that are not blank.
func scanTreeSized(src string, firstLine, lines int) (*tree, int32, error) {
	if !utf8.ValidString(src) {
		return nil, 0, errUnsupported // the library decides what invalid bytes become
	}
	s := &scanner{src: src, line: 1, first: firstLine, t: newTree(src, lines*3+8)}
	s.t.spans = true
	s.skipTrivia()
	if s.pos >= len(src) {
		return nil, 0, errUnsupported
	}
	ind, ok := s.indentOf(s.pos)
	if !ok || ind != 0 {
		return nil, 0, errUnsupported
	}
	root, err := s.parseMap(0, s.pos)
	if err != nil {
		return nil, 0, err
	}
	s.skipTrivia()
	if s.pos < len(src) {
		return nil, 0, errUnsupported
	}
	return s.t, root, nil
}

// lineEnd returns the offset of the newline ending the line at p (or len).
func (s *scanner) lineEnd(p int) int {
	if i := strings.IndexByte(s.src[p:], '\n'); i >= 0 {
		return p + i
	}
	return len(s.src)
}

func (s *scanner) nextLine() {
	e := s.lineEnd(s.pos)
	if e < len(s.src) {
		e++
	}
	s.pos = e
	s.line++
}

// indentOf returns the indentation of the line starting at p; ok is false
// when the indentation holds a tab.
func (s *scanner) indentOf(p int) (int, bool) {
	i := p
	for i < len(s.src) && s.src[i] == ' ' {
		i++
	}
	if i < len(s.src) && s.src[i] == '\t' {
		return 0, false
	}
	return i - p, true
}

// isTrivia reports whether the line at p is blank or only a comment.
func (s *scanner) isTrivia(p int) bool {
	i := p
	for i < len(s.src) && (s.src[i] == ' ' || s.src[i] == '\t') {
		i++
	}
	return i >= len(s.src) || s.src[i] == '\n' || s.src[i] == '#' || (s.src[i] == '\r' && i+1 < len(s.src) && s.src[i+1] == '\n')
}

func (s *scanner) skipTrivia() {
	for s.pos < len(s.src) && s.isTrivia(s.pos) {
		s.nextLine()
	}
}

func (s *scanner) fileLine() int32 { return int32(s.line + s.first - 1) }

// peekIndent returns the indentation of the next non-trivia line, or -1 at the end.
func (s *scanner) peekIndent() (int, error) {
	s.skipTrivia()
	if s.pos >= len(s.src) {
		return -1, nil
	}
	ind, ok := s.indentOf(s.pos)
	if !ok {
		return 0, errUnsupported
	}
	return ind, nil
}

// parseMap reads a block mapping whose keys sit at column ind; the first key
// starts at offset at (which may be inside the current line, after "- ").
func (s *scanner) parseMap(ind int, at int) (int32, error) {
	if s.depth++; s.depth > maxDepth {
		return 0, errUnsupported
	}
	defer func() { s.depth-- }()
	m := s.t.add(node{kind: kMap, style: stBlock, line: s.fileLine(), indent: int32(ind), start: int32(s.pos)})
	lineStart := s.pos
	var keys keySet
	for {
		if err := s.parseEntry(m, ind, lineStart, at, &keys); err != nil {
			return 0, err
		}
		next, err := s.peekIndent()
		if err != nil {
			return 0, err
		}
		if next < ind {
			break
		}
		if next > ind {
			return 0, errUnsupported
		}
		if s.src[s.pos+ind] == '-' && (s.pos+ind+1 >= len(s.src) || s.src[s.pos+ind+1] == ' ' || s.src[s.pos+ind+1] == '\n') {
			// A sequence at the same indentation ends this map only when
			// the map is a sequence value; here it is invalid.
			return 0, errUnsupported
		}
		lineStart = s.pos
		at = s.pos + ind
	}
	s.t.nodes[m].end = s.lastKeyEnd
	return m, nil
}

// parseEntry reads "key: value" with the key at offset at.
func (s *scanner) parseEntry(m int32, ind int, lineStart, at int, keys *keySet) error {
	le := s.lineEnd(s.pos)
	key, after, err := s.parseKey(at, le)
	if err != nil {
		return err
	}
	if !keys.add(s.t, m, key) {
		return errUnsupported // duplicate key: let the YAML library report it
	}
	k := s.t.add(node{kind: kScalar, tag: tStr, val: key, line: s.fileLine(), start: int32(at), lstart: int32(lineStart), colon: int32(after), indent: int32(ind)})
	s.t.appendChild(m, k)
	v, err := s.parseValue(after, le, ind, false)
	if err != nil {
		return err
	}
	s.t.nodes[k].next = v
	s.t.nodes[m].last = v
	s.t.nodes[k].eend = int32(s.entryEnd(v))
	s.lastKeyEnd = s.t.nodes[k].eend
	return nil
}

// entryEnd is where the entry whose value is v ends: after its last line.
func (s *scanner) entryEnd(v int32) int {
	n := s.t.nodes[v]
	if n.kind != kScalar && n.style == stBlock {
		return int(n.end)
	}
	return s.pos
}

func isPlainKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/'
}

// parseKey reads a plain or double-quoted key and its ':'.
func (s *scanner) parseKey(at, le int) (string, int, error) {
	var key string
	i := at
	if i < le && s.src[i] == '"' {
		v, j, err := parseDouble(s.src, i, le)
		if err != nil {
			return "", 0, err
		}
		key, i = v, j
	} else {
		for i < le && isPlainKeyByte(s.src[i]) {
			i++
		}
		if i == at || s.src[at] == '-' || s.src[at] == '.' {
			return "", 0, errUnsupported
		}
		key = s.src[at:i]
		if tg, ok := plainTag(key); !ok || tg != tStr && tg != tInt {
			return "", 0, errUnsupported
		}
	}
	if i >= le || s.src[i] != ':' {
		return "", 0, errUnsupported
	}
	i++
	if i < le && s.src[i] != ' ' {
		return "", 0, errUnsupported
	}
	return key, i, nil
}

// parseValue reads the value that follows a "key:" or "- " at offset p of the
// current line (ending at le). ind is the indentation of the owning entry.
// The scanner ends positioned at the start of the line after the value.
func (s *scanner) parseValue(p, le, ind int, inSeq bool) (int32, error) {
	for p < le && s.src[p] == ' ' {
		p++
	}
	if p >= le || s.src[p] == '#' {
		// The value is on the following lines, or empty.
		line := s.fileLine()
		s.nextLine()
		next, err := s.peekIndent()
		if err != nil {
			return 0, err
		}
		if next >= 0 && s.src[s.pos+next] == '-' && isSeqDash(s.src, s.pos+next) && (next > ind || next == ind && !inSeq) {
			return s.parseSeq(next)
		}
		if next > ind {
			return s.parseMap(next, s.pos+next)
		}
		return s.t.add(node{kind: kScalar, style: stPlain, tag: tNull, line: line, start: int32(p), end: int32(p)}), nil
	}
	line := s.fileLine()
	c := s.src[p]
	var n node
	switch {
	case c == '|' || c == '>':
		return s.parseBlockScalar(p, le, ind)
	case c == '[':
		v, err := s.parseFlowSeq(p, le)
		if err != nil {
			return 0, err
		}
		s.nextLine()
		return v, s.noContinuation(ind)
	case c == '{':
		j := p + 1
		for j < le && s.src[j] == ' ' {
			j++
		}
		if j >= le || s.src[j] != '}' {
			return 0, errUnsupported
		}
		n = node{kind: kMap, style: stFlow, start: int32(p), end: int32(j + 1)}
		p = j + 1
	case c == '"':
		v, j, err := parseDouble(s.src, p, le)
		if err != nil {
			return 0, err
		}
		n = node{kind: kScalar, style: stDouble, tag: tStr, val: v, start: int32(p), end: int32(j)}
		p = j
	case c == '\'':
		v, j, err := parseSingle(s.src, p, le)
		if err != nil {
			return 0, err
		}
		n = node{kind: kScalar, style: stSingle, tag: tStr, val: v, start: int32(p), end: int32(j)}
		p = j
	default:
		j := plainEnd(s.src, p, le)
		text := s.src[p:j]
		tg, ok := plainTag(text)
		if !ok {
			return 0, errUnsupported
		}
		n = node{kind: kScalar, style: stPlain, tag: tg, val: text, start: int32(p), end: int32(j)}
		p = j
	}
	if !restIsComment(s.src, p, le) {
		return 0, errUnsupported
	}
	n.line = line
	v := s.t.add(n)
	s.nextLine()
	return v, s.noContinuation(ind)
}

func isSeqDash(src string, p int) bool {
	return p+1 >= len(src) || src[p+1] == ' ' || src[p+1] == '\n'
}

// noContinuation refuses a more-indented line after an inline value: YAML
// would read it as a continuation of a plain scalar, or as an error.
func (s *scanner) noContinuation(ind int) error {
	next, err := s.peekIndent()
	if err != nil {
		return err
	}
	if next > ind {
		return errUnsupported
	}
	return nil
}

// restIsComment reports whether only spaces and an optional " #" comment follow p.
func restIsComment(src string, p, le int) bool {
	if p < le && src[p] != ' ' {
		return false
	}
	for p < le && src[p] == ' ' {
		p++
	}
	return p >= le || src[p] == '#'
}

// plainEnd returns the end of a plain scalar starting at p: before " #" or
// the end of the line, trailing spaces trimmed.
func plainEnd(src string, p, le int) int {
	j := p
	for j < le {
		if src[j] == '#' && j > p && src[j-1] == ' ' {
			break
		}
		j++
	}
	for j > p && src[j-1] == ' ' {
		j--
	}
	return j
}

// plainTag resolves a plain scalar the way both readers agree on; ok is false
// for spellings where YAML versions or libraries differ (yes/no, octal,
// timestamps, ...), which then go to the YAML library.
func plainTag(s string) (tag, bool) {
	switch s {
	case "null", "Null", "NULL", "~":
		return tNull, true
	case "true", "True", "TRUE", "false", "False", "FALSE":
		return tBool, true
	}
	if s == "" {
		return tNull, true
	}
	c := s[0]
	if c == '-' || c >= '0' && c <= '9' {
		digits := s
		if c == '-' {
			digits = s[1:]
		}
		if digits == "" {
			return 0, false
		}
		if isDigits(digits) {
			if len(digits) > 1 && digits[0] == '0' || len(digits) > 18 {
				return 0, false
			}
			return tInt, true
		}
		if i := strings.IndexByte(digits, '.'); i > 0 && isDigits(digits[:i]) && i+1 < len(digits) && isDigits(digits[i+1:]) && len(digits) < 16 {
			if i > 1 && digits[0] == '0' {
				return 0, false
			}
			return tFloat, true
		}
		return 0, false
	}
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '/') {
		return 0, false
	}
	if l := c | 0x20; len(s) <= 3 && (l == 'y' || l == 'n' || l == 'o' || l == 'i') {
		// YAML 1.1 booleans and the special floats, in any case
		for _, w := range [...]string{"y", "n", "yes", "no", "on", "off", "nan", "inf"} {
			if strings.EqualFold(s, w) {
				return 0, false
			}
		}
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if notPlain[b] {
			return 0, false
		}
		if b >= 0x80 {
			r, _ := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError || r == 0xFEFF || r == 0x85 || r == 0x2028 || r == 0x2029 || r == 0xA0 {
				return 0, false
			}
		}
	}
	return tStr, true
}

// notPlain marks the bytes that plainTag leaves to the library: ": " would
// start a mapping; flow indicators, quotes and control characters.
var notPlain = func() (t [256]bool) {
	for _, b := range []byte(":\t\"'`\\{}[],&*!|>%@\x7f") {
		t[b] = true
	}
	for b := 0; b < 0x20; b++ {
		t[b] = true
	}
	return t
}()

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseSeq reads a block sequence whose dashes sit at column ind.
func (s *scanner) parseSeq(ind int) (int32, error) {
	if s.depth++; s.depth > maxDepth {
		return 0, errUnsupported
	}
	defer func() { s.depth-- }()
	q := s.t.add(node{kind: kSeq, style: stBlock, line: s.fileLine(), indent: int32(ind), start: int32(s.pos)})
	for {
		lineStart := s.pos
		dash := s.pos + ind
		le := s.lineEnd(s.pos)
		p := dash + 1
		for p < le && s.src[p] == ' ' {
			p++
		}
		var item int32
		var err error
		if p < le && s.src[p] != '#' && s.looksLikeKey(p, le) {
			item, err = s.parseMap(p-s.pos, p)
		} else {
			item, err = s.parseValue(dash+1, le, ind, true)
		}
		if err != nil {
			return 0, err
		}
		it := &s.t.nodes[item]
		it.lstart = int32(lineStart)
		it.colon = int32(dash + 1)
		it.eend = int32(s.entryEnd(item))
		s.t.appendChild(q, item)
		next, err := s.peekIndent()
		if err != nil {
			return 0, err
		}
		if next != ind || s.src[s.pos+ind] != '-' || !isSeqDash(s.src, s.pos+ind) {
			if next > ind {
				return 0, errUnsupported
			}
			break
		}
	}
	n := &s.t.nodes[q]
	n.end = s.t.nodes[n.last].eend
	return q, nil
}

// looksLikeKey reports whether a compact mapping ("- key: value") starts at p.
func (s *scanner) looksLikeKey(p, le int) bool {
	i := p
	if s.src[i] == '"' {
		_, j, err := parseDouble(s.src, i, le)
		if err != nil {
			return false
		}
		i = j
	} else {
		for i < le && isPlainKeyByte(s.src[i]) {
			i++
		}
		if i == p {
			return false
		}
	}
	return i < le && s.src[i] == ':' && (i+1 == le || s.src[i+1] == ' ')
}

// parseFlowSeq reads a one-line flow sequence of scalars.
func (s *scanner) parseFlowSeq(p, le int) (int32, error) {
	q := s.t.add(node{kind: kSeq, style: stFlow, line: s.fileLine(), start: int32(p)})
	i := p + 1
	for {
		for i < le && s.src[i] == ' ' {
			i++
		}
		if i >= le {
			return 0, errUnsupported
		}
		if s.src[i] == ']' {
			if s.t.nodes[q].first != 0 && s.src[i-1] != ' ' && s.src[i-1] != '[' && s.src[i-1] != ',' {
				// fine: "a]"
			}
			break
		}
		var n node
		switch s.src[i] {
		case '"':
			v, j, err := parseDouble(s.src, i, le)
			if err != nil {
				return 0, err
			}
			n = node{kind: kScalar, style: stDouble, tag: tStr, val: v, start: int32(i), end: int32(j)}
			i = j
		case '\'':
			v, j, err := parseSingle(s.src, i, le)
			if err != nil {
				return 0, err
			}
			n = node{kind: kScalar, style: stSingle, tag: tStr, val: v, start: int32(i), end: int32(j)}
			i = j
		default:
			j := i
			for j < le && s.src[j] != ',' && s.src[j] != ']' && s.src[j] != '#' {
				j++
			}
			k := j
			for k > i && s.src[k-1] == ' ' {
				k--
			}
			text := s.src[i:k]
			tg, ok := plainTag(text)
			if !ok || text == "" || strings.IndexByte(text, ' ') >= 0 {
				return 0, errUnsupported
			}
			n = node{kind: kScalar, style: stPlain, tag: tg, val: text, start: int32(i), end: int32(k)}
			i = k
		}
		n.line = s.fileLine()
		s.t.appendChild(q, s.t.add(n))
		for i < le && s.src[i] == ' ' {
			i++
		}
		if i < le && s.src[i] == ',' {
			i++
			for i < le && s.src[i] == ' ' {
				i++
			}
			if i < le && s.src[i] == ']' {
				return 0, errUnsupported // a trailing comma: leave it to the library
			}
			continue
		}
		if i < le && s.src[i] == ']' {
			break
		}
		return 0, errUnsupported
	}
	s.t.nodes[q].end = int32(i + 1)
	if !restIsComment(s.src, i+1, le) {
		return 0, errUnsupported
	}
	return q, nil
}

// parseBlockScalar reads a literal (|) or folded (>) block scalar whose header
// is at p; ind is the indentation of the owning entry.
func (s *scanner) parseBlockScalar(p, le, ind int) (int32, error) {
	line := s.fileLine()
	folded := s.src[p] == '>'
	chomp := byte(0)
	j := p + 1
	if j < le && (s.src[j] == '-' || s.src[j] == '+') {
		chomp = s.src[j]
		j++
	}
	if !restIsComment(s.src, j, le) {
		return 0, errUnsupported // explicit indentation indicators and the like
	}
	s.nextLine()
	// Find the content indentation from the first non-empty line.
	contentInd := -1
	var lines []string
	end := le
	for s.pos < len(s.src) {
		e := s.lineEnd(s.pos)
		text := s.src[s.pos:e]
		sp := 0
		for sp < len(text) && text[sp] == ' ' {
			sp++
		}
		if sp == len(text) { // empty or spaces only
			if contentInd >= 0 && sp > contentInd {
				lines = append(lines, text[contentInd:])
			} else {
				if contentInd < 0 && sp > ind+1 && sp > 0 {
					return 0, errUnsupported // leading spaces-only lines decide indentation in subtle ways
				}
				lines = append(lines, "")
			}
			s.nextLine()
			continue
		}
		if contentInd < 0 {
			if sp <= ind {
				break
			}
			contentInd = sp
		}
		if sp < contentInd {
			break
		}
		if text[sp] == '\t' || strings.IndexByte(text[:sp], '\t') >= 0 {
			return 0, errUnsupported
		}
		if folded && sp > contentInd {
			return 0, errUnsupported
		}
		lines = append(lines, text[contentInd:])
		end = e
		s.nextLine()
	}
	// Trailing empty lines belong to the value only through chomping.
	body := len(lines)
	for body > 0 && lines[body-1] == "" {
		body--
	}
	trailing := len(lines) - body
	if contentInd < 0 {
		trailing = len(lines)
		body = 0
	}
	var b strings.Builder
	for i := 0; i < body; i++ {
		l := lines[i]
		if i > 0 {
			if folded && l != "" && lines[i-1] != "" {
				b.WriteByte(' ')
			} else if !folded || lines[i-1] != "" || l == "" {
				b.WriteByte('\n')
			}
		}
		b.WriteString(l)
	}
	if folded {
		// Folding turns each empty line between text lines into one newline;
		// the loop above wrote one newline per line break, which equals that.
		if strings.Contains(b.String(), "\n") {
			return 0, errUnsupported // keep folded scalars with empty lines for the library
		}
	}
	val := b.String()
	switch chomp {
	case '-':
	case '+':
		if body > 0 {
			val += "\n" + strings.Repeat("\n", trailing)
		} else {
			val = strings.Repeat("\n", trailing)
		}
	default:
		if body > 0 {
			val += "\n"
		}
	}
	st := stLiteral
	if folded {
		st = stFolded
	}
	v := s.t.add(node{kind: kScalar, style: st, tag: tStr, val: val, line: line, start: int32(p), end: int32(end)})
	return v, nil
}

// parseDouble reads a one-line double-quoted scalar starting at p.
func parseDouble(src string, p, le int) (string, int, error) {
	i := p + 1
	start := i
	var b *strings.Builder
	for i < le {
		c := src[i]
		if c == '"' {
			if b == nil {
				return src[start:i], i + 1, nil
			}
			b.WriteString(src[start:i])
			return b.String(), i + 1, nil
		}
		if c == '\t' || c < 0x20 && c != '\t' {
			return "", 0, errUnsupported
		}
		if c != '\\' {
			i++
			continue
		}
		if b == nil {
			b = &strings.Builder{}
		}
		b.WriteString(src[start:i])
		if i+1 >= le {
			return "", 0, errUnsupported
		}
		e := src[i+1]
		i += 2
		switch e {
		case '0':
			b.WriteByte(0)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'v':
			b.WriteByte(11)
		case 'f':
			b.WriteByte(12)
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case ' ', '"', '/', '\\':
			b.WriteByte(e)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > le {
				return "", 0, errUnsupported
			}
			r, err := strconv.ParseUint(src[i:i+n], 16, 32)
			if err != nil || e != 'x' && !utf8.ValidRune(rune(r)) {
				return "", 0, errUnsupported
			}
			if e == 'x' && r >= 0x80 {
				return "", 0, errUnsupported // libraries disagree on \x80-\xff
			}
			b.WriteRune(rune(r))
			i += n
		default:
			return "", 0, errUnsupported
		}
		start = i
	}
	return "", 0, errUnsupported
}

// parseSingle reads a one-line single-quoted scalar starting at p.
func parseSingle(src string, p, le int) (string, int, error) {
	i := p + 1
	var b strings.Builder
	start := i
	for i < le {
		c := src[i]
		if c == '\'' {
			if i+1 < le && src[i+1] == '\'' {
				b.WriteString(src[start : i+1])
				i += 2
				start = i
				continue
			}
			b.WriteString(src[start:i])
			return b.String(), i + 1, nil
		}
		if c < 0x20 {
			return "", 0, errUnsupported
		}
		i++
	}
	return "", 0, errUnsupported
}
