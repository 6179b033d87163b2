package hooks

import (
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

// A shell command is approved only when it cannot touch the loop's files
// as far as its text tells: it is read the way the shell reads it (quotes,
// escapes, variables set in the command or inherited, ~, braces, globs),
// and any construct whose value only the running shell knows (command
// substitution, eval, ANSI-C quoting, ${...} operators, extended globs)
// means no approval. A program that computes a name when it runs (a
// script, an interpreter, xargs fed by tr) is beyond what a hook can read:
// the state file's own checks and the engine's confinement cover it.

// char is one character of a word, and whether quoting made it literal.
type char struct {
	r      rune
	quoted bool
}

// shellScan is one command being read.
type shellScan struct {
	getenv func(string) string
	vars   map[string]string // set by the command itself
	words  [][]char
	word   []char
	inWord bool
	unsure bool // a construct only the running shell can evaluate
}

// shellWords splits command into words as the shell would expand them
// (without running anything); unsure reports a construct it cannot
// evaluate.
func shellWords(command string, getenv func(string) string) (words [][]char, unsure bool) {
	s := &shellScan{getenv: getenv, vars: map[string]string{}}
	rs := []rune(command)
	var heredocs []heredoc // started on this line, their bodies follow it
	for i := 0; i < len(rs) && !s.unsure; i++ {
		c := rs[i]
		switch {
		case c == 0:
			s.unsure = true
		case c == '\n' && len(heredocs) > 0:
			s.end()
			i = s.heredocBodies(rs, i+1, heredocs) - 1
			heredocs = nil
		case c == '<' && i+2 < len(rs) && rs[i+1] == '<' && rs[i+2] != '<':
			s.end()
			var h heredoc
			h, i = readHeredoc(rs, i+2)
			if h.delim == "" {
				s.unsure = true
			}
			heredocs = append(heredocs, h)
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s.end()
		case strings.ContainsRune(";|&<>()", c):
			if c == '(' && i > 0 && strings.ContainsRune("@+!?*", rs[i-1]) && s.inWord {
				s.unsure = true // an extended glob
			}
			s.end()
		case c == '#' && !s.inWord:
			for i+1 < len(rs) && rs[i+1] != '\n' {
				i++ // the newline itself is read next: it may start a here-document's body
			}
		case c == '\\':
			if i+1 < len(rs) {
				i++
				if rs[i] != '\n' {
					s.add(rs[i], true)
				}
			}
		case c == '\'':
			s.inWord = true
			for i++; i < len(rs) && rs[i] != '\''; i++ {
				s.add(rs[i], true)
			}
		case c == '"':
			s.inWord = true
			i = s.double(rs, i+1)
		case c == '`':
			s.unsure = true
		case c == '$':
			i = s.dollar(rs, i, false)
		case c == '~' && !s.inWord && (i+1 == len(rs) || rs[i+1] == '/'):
			s.expand(s.getenv("HOME"), false)
		default:
			s.add(c, false)
		}
	}
	s.end()
	return s.words, s.unsure
}

// heredoc is a here-document: its body is data for the command, neither
// split into words nor globbed; unless its delimiter is quoted, the shell
// expands $(...) and backquotes in it.
type heredoc struct {
	delim  string
	quoted bool
	dash   bool // <<-: leading tabs stripped
}

// readHeredoc reads the operator's delimiter from rs[i] (just after <<);
// it returns the index of the delimiter's last character.
func readHeredoc(rs []rune, i int) (heredoc, int) {
	var h heredoc
	if i < len(rs) && rs[i] == '-' {
		h.dash = true
		i++
	}
	for i < len(rs) && (rs[i] == ' ' || rs[i] == '\t') {
		i++
	}
	var b strings.Builder
	for ; i < len(rs) && !strings.ContainsRune(" \t\n;|&<>()", rs[i]); i++ {
		if rs[i] == '\'' || rs[i] == '"' || rs[i] == '\\' {
			h.quoted = true
			continue
		}
		b.WriteRune(rs[i])
	}
	h.delim = b.String()
	return h, i - 1
}

// heredocBodies skips the bodies of hs, which start at rs[i]; it returns
// the index after the last one. An unquoted body that substitutes a command
// makes the scan unsure.
func (s *shellScan) heredocBodies(rs []rune, i int, hs []heredoc) int {
	for _, h := range hs {
		for i < len(rs) {
			end := i
			for end < len(rs) && rs[end] != '\n' {
				end++
			}
			line := string(rs[i:end])
			i = min(end+1, len(rs))
			if h.dash {
				line = strings.TrimLeft(line, "\t")
			}
			if line == h.delim {
				break
			}
			if !h.quoted && (strings.Contains(line, "$(") || strings.Contains(line, "`")) {
				s.unsure = true
				return i
			}
		}
	}
	return i
}

func (s *shellScan) add(r rune, quoted bool) {
	s.inWord = true
	s.word = append(s.word, char{r, quoted})
}

// expand adds a variable's value: unquoted, its glob characters count.
func (s *shellScan) expand(v string, quoted bool) {
	for _, r := range v {
		s.add(r, quoted)
	}
	s.inWord = true
}

// end closes the current word, recording an assignment NAME=VALUE.
func (s *shellScan) end() {
	if !s.inWord {
		return
	}
	w := s.word
	if eq := assignment(w); eq > 0 {
		s.vars[string(runes(w[:eq]))] = string(runes(w[eq+1:]))
	}
	s.words = append(s.words, w)
	s.word, s.inWord = nil, false
}

// assignment returns the index of the '=' of NAME=VALUE, or -1.
func assignment(w []char) int {
	for i, c := range w {
		switch {
		case c.r == '=' && !c.quoted && i > 0:
			return i
		case c.quoted || !(c.r == '_' || unicode.IsLetter(c.r) || i > 0 && unicode.IsDigit(c.r)):
			return -1
		}
	}
	return -1
}

// double reads a double-quoted string from rs[i]; it returns the index of
// the closing quote.
func (s *shellScan) double(rs []rune, i int) int {
	for ; i < len(rs) && !s.unsure; i++ {
		switch c := rs[i]; {
		case c == '"':
			return i
		case c == '\\' && i+1 < len(rs) && strings.ContainsRune("$`\"\\\n", rs[i+1]):
			i++
			if rs[i] != '\n' {
				s.add(rs[i], true)
			}
		case c == '`':
			s.unsure = true
		case c == '$':
			i = s.dollar(rs, i, true)
		default:
			s.add(c, true)
		}
	}
	return i
}

// dollar reads an expansion at rs[i] == '$'; it returns the index of its
// last character.
func (s *shellScan) dollar(rs []rune, i int, quoted bool) int {
	if i+1 >= len(rs) {
		s.add('$', quoted)
		return i
	}
	switch n := rs[i+1]; {
	case n == '(' || n == '\'' || n == '[':
		s.unsure = true // command substitution, arithmetic, ANSI-C quoting
		return i + 1
	case n == '"' && !quoted:
		s.inWord = true
		return s.double(rs, i+2)
	case n == '{':
		end := i + 2
		for end < len(rs) && rs[end] != '}' {
			end++
		}
		name := string(rs[i+2 : min(end, len(rs))])
		if end == len(rs) || !isName(name) {
			s.unsure = true // ${...} with an operator, or unterminated
			return end
		}
		s.expand(s.value(name), quoted)
		return end
	case strings.ContainsRune("@*#?$!-0123456789", n):
		return i + 1 // positional and special parameters: not names of files here
	case n == '_' || unicode.IsLetter(n):
		end := i + 1
		for end < len(rs) && (rs[end] == '_' || unicode.IsLetter(rs[end]) || unicode.IsDigit(rs[end])) {
			end++
		}
		s.expand(s.value(string(rs[i+1:end])), quoted)
		return end - 1
	}
	s.add('$', quoted)
	return i
}

// value is a variable's value: set earlier in the command, else inherited
// (the hook's environment is the session's).
func (s *shellScan) value(name string) string {
	if v, ok := s.vars[name]; ok {
		return v
	}
	return s.getenv(name)
}

func isName(v string) bool {
	for i, r := range v {
		if !(r == '_' || unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r)) {
			return false
		}
	}
	return v != ""
}

func runes(w []char) []rune {
	out := make([]rune, len(w))
	for i, c := range w {
		out[i] = c.r
	}
	return out
}

// shellTouches reports whether command, run in cwd, may touch the loop's
// files: fail closed, so true whenever that cannot be ruled out.
func (l *loop) shellTouches(command, cwd string, getenv func(string) string) bool {
	// The .git folder is the workers' to use through git; the shell guard
	// keeps to .claude and the loop's files.
	guarded, ok := l.guarded(false)
	if !ok {
		return true
	}
	names := []string{".claude", "aot-loop"}
	for _, g := range guarded {
		names = append(names, strings.ToLower(filepath.Base(g)))
	}
	// The text with every quote and escape removed names none of them: a
	// quoted or escaped spelling (".cl"aude, .cl\aude) is caught here.
	flat := strings.ToLower(strings.NewReplacer("'", "", `"`, "", `\`, "").Replace(command))
	if namesAny(flat, names) {
		return true
	}
	words, unsure := shellWords(command, getenv)
	if unsure {
		return true
	}
	if cwd == "" || !filepath.IsAbs(cwd) {
		cwd = l.root
	}
	bases := []string{cwd}
	for i, w := range words {
		text := string(runes(w))
		if namesAny(strings.ToLower(text), names) || text == "eval" {
			return true
		}
		if text == "popd" {
			return true // back to a folder the command text does not name
		}
		if i > 0 && (string(runes(words[i-1])) == "cd" || string(runes(words[i-1])) == "pushd") && text != "" {
			if text == "-" {
				return true // $OLDPWD, which only the running shell knows
			}
			bases = append(bases, absFrom(cwd, text))
		}
		parts := [][]char{w}
		if eq := indexUnquoted(w, '='); eq >= 0 {
			parts = append(parts, w[eq+1:])
		}
		for _, p := range parts {
			if touches(p, bases, guarded) {
				return true
			}
		}
	}
	return false
}

func namesAny(text string, names []string) bool {
	for _, n := range names {
		if n != "" && strings.Contains(text, n) {
			return true
		}
	}
	return false
}

func indexUnquoted(w []char, r rune) int {
	for i, c := range w {
		if c.r == r && !c.quoted {
			return i
		}
	}
	return -1
}

func absFrom(base, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return base + string(filepath.Separator) + p
}

// maxBraces bounds a word's brace expansion.
const maxBraces = 256

// touches reports whether word, taken from each of bases, may name a
// guarded path: a glob (unquoted * ? [) that could match one, an ancestor
// of one or something inside one, with a leading dot matched like any
// other character (dotglob may be set); or a plain path that, links
// followed, lies inside one.
func touches(word []char, bases, guarded []string) bool {
	text := string(runes(word))
	if text == "" || text == "[" || text == "]" || text == "[[" || text == "]]" {
		return false
	}
	alts, ok := braces(word)
	if !ok {
		return true
	}
	for _, alt := range alts {
		glob := false
		for _, c := range alt {
			glob = glob || !c.quoted && strings.ContainsRune("*?[", c.r)
		}
		for _, base := range bases {
			if glob {
				if globTouches(pattern(alt), base, guarded) {
					return true
				}
				continue
			}
			r, ok := resolve(absFrom(base, string(runes(alt))))
			if !ok {
				continue // not a path a command could open either
			}
			for _, g := range guarded {
				if within(r, g, true) {
					return true
				}
			}
		}
	}
	return false
}

// pattern writes a word as a path.Match pattern: quoted characters escaped.
func pattern(w []char) string {
	var b strings.Builder
	for _, c := range w {
		if c.quoted && strings.ContainsRune(`*?[]\`, c.r) {
			b.WriteByte('\\')
		}
		b.WriteRune(c.r)
	}
	return b.String()
}

// globTouches reports whether the glob pat, from base, overlaps a guarded
// path: matches it, an ancestor of it or something inside it.
func globTouches(pat, base string, guarded []string) bool {
	if !strings.HasPrefix(pat, "/") {
		pat = base + "/" + pat
	}
	ps := segments(strings.ToLower(filepath.ToSlash(pat)))
	for _, g := range guarded {
		if overlaps(ps, segments(strings.ToLower(filepath.ToSlash(g)))) {
			return true
		}
	}
	return false
}

// segments splits an absolute slash path, dropping "." and applying ".."
// as written.
func segments(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	return out
}

// overlaps matches pattern segments against a path's: true when the
// pattern can name the path, one of its ancestors (it ends first) or
// something inside it (the path ends first). "**" spans any number of
// segments. A malformed pattern overlaps everything.
func overlaps(pat, p []string) bool {
	if len(pat) == 0 || len(p) == 0 {
		return true
	}
	if pat[0] == "**" {
		return overlaps(pat[1:], p) || overlaps(pat, p[1:])
	}
	ok, err := path.Match(pat[0], p[0])
	if err != nil {
		return true
	}
	return ok && overlaps(pat[1:], p[1:])
}

// braces expands a word's unquoted brace groups ({a,b} and {1..3}); ok is
// false when it would make more than maxBraces words or a range is not of
// numbers or letters.
func braces(w []char) (out [][]char, ok bool) {
	open, closeAt, depth := -1, -1, 0
	for i, c := range w {
		if c.quoted {
			continue
		}
		switch c.r {
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth > 0 {
				depth--
				if depth == 0 {
					closeAt = i
				}
			}
		}
		if closeAt >= 0 {
			break
		}
	}
	if open < 0 || closeAt < 0 {
		return [][]char{w}, true
	}
	inner := w[open+1 : closeAt]
	var alts [][]char
	if items := splitTop(inner); len(items) > 1 {
		alts = items
	} else if seq, isSeq, ok := sequence(string(runes(inner))); isSeq {
		if !ok {
			return nil, false
		}
		for _, v := range seq {
			var a []char
			for _, r := range v {
				a = append(a, char{r, true})
			}
			alts = append(alts, a)
		}
	} else {
		// Not an expansion ({} or {x}): the braces are literal; look on.
		rest, ok := braces(w[closeAt+1:])
		if !ok {
			return nil, false
		}
		for _, r := range rest {
			out = append(out, append(append([]char{}, w[:closeAt+1]...), r...))
		}
		return out, len(out) <= maxBraces
	}
	for _, a := range alts {
		word := append(append(append([]char{}, w[:open]...), a...), w[closeAt+1:]...)
		more, ok := braces(word)
		if !ok {
			return nil, false
		}
		out = append(out, more...)
		if len(out) > maxBraces {
			return nil, false
		}
	}
	return out, true
}

// splitTop splits a brace group's inside at its top-level unquoted commas.
func splitTop(w []char) [][]char {
	var out [][]char
	depth, start := 0, 0
	for i, c := range w {
		if c.quoted {
			continue
		}
		switch c.r {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, w[start:i])
				start = i + 1
			}
		}
	}
	return append(out, w[start:])
}

// sequence expands a brace range X..Y[..STEP]: isSeq says the text has that
// shape, ok that its values could be listed.
func sequence(t string) (vals []string, isSeq, ok bool) {
	parts := strings.Split(t, "..")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, false, false
	}
	a, errA := strconv.Atoi(parts[0])
	b, errB := strconv.Atoi(parts[1])
	if errA != nil || errB != nil {
		ra, rb := []rune(parts[0]), []rune(parts[1])
		if len(ra) != 1 || len(rb) != 1 || !unicode.IsLetter(ra[0]) || !unicode.IsLetter(rb[0]) {
			return nil, true, false
		}
		a, b = int(ra[0]), int(rb[0])
		defer func() {
			for i, v := range vals {
				n, _ := strconv.Atoi(v)
				vals[i] = string(rune(n))
			}
		}()
	}
	if d := b - a; d > maxBraces || d < -maxBraces {
		return nil, true, false
	}
	step := 1
	if b < a {
		step = -1
	}
	for v := a; ; v += step {
		vals = append(vals, strconv.Itoa(v))
		if v == b {
			break
		}
	}
	return vals, true, true
}
