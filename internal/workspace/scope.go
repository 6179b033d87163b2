package workspace

import (
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Overlap reports whether two atoms' file scopes may name a common file, so
// that the scheduler never runs them at once. A scope is a list of
// slash-separated doublestar globs relative to the project folder ("**",
// "*", "?", "[a-z]", "{a,b}") naming files: a folder is "src/**". An empty
// scope is the whole project: it overlaps every scope. When two wildcards
// meet within one path element the answer errs towards overlap.
func Overlap(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, x := range a {
		for _, y := range b {
			for _, xe := range expandBraces(x) {
				for _, ye := range expandBraces(y) {
					if overlapSegments(segments(xe), segments(ye)) {
						return true
					}
				}
			}
		}
	}
	return false
}

// segments splits a cleaned pattern into path elements, "" for the root.
func segments(p string) []string {
	p = strings.TrimPrefix(path.Clean("/"+strings.TrimSpace(p)), "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// overlapSegments reports whether some path matches both patterns, one of
// them possibly naming a folder of the other.
func overlapSegments(a, b []string) bool {
	memo := map[[2]int]bool{}
	var walk func(i, j int) bool
	walk = func(i, j int) bool {
		if i == len(a) || j == len(b) {
			// Both ended, or what is left of one matches nothing but
			// zero elements.
			rest := a[i:]
			if i == len(a) {
				rest = b[j:]
			}
			for _, e := range rest {
				if e != "**" {
					return false
				}
			}
			return true
		}
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		var r bool
		switch {
		case a[i] == "**":
			r = walk(i+1, j) || walk(i, j+1)
		case b[j] == "**":
			r = walk(i, j+1) || walk(i+1, j)
		default:
			r = overlapElement(a[i], b[j]) && walk(i+1, j+1)
		}
		memo[key] = r
		return r
	}
	return walk(0, 0)
}

const meta = `*?[\`

// overlapElement reports whether one path element can match both patterns.
func overlapElement(x, y string) bool {
	xw, yw := strings.ContainsAny(x, meta), strings.ContainsAny(y, meta)
	switch {
	case !xw && !yw:
		return x == y
	case !xw:
		ok, err := doublestar.Match(y, x)
		return ok || err != nil
	case !yw:
		ok, err := doublestar.Match(x, y)
		return ok || err != nil
	}
	// Two wildcards: their literal prefixes and suffixes must agree.
	px, py := x[:strings.IndexAny(x, meta)], y[:strings.IndexAny(y, meta)]
	sx, sy := x[strings.LastIndexAny(x, meta)+1:], y[strings.LastIndexAny(y, meta)+1:]
	return (strings.HasPrefix(px, py) || strings.HasPrefix(py, px)) &&
		(strings.HasSuffix(sx, sy) || strings.HasSuffix(sy, sx))
}

// expandBraces expands {a,b} alternatives (nested too) into plain patterns.
func expandBraces(p string) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}
	}
	depth, start := 0, open+1
	var alts []string
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				alts = append(alts, p[start:i])
				var out []string
				for _, alt := range alts {
					out = append(out, expandBraces(p[:open]+alt+p[i+1:])...)
				}
				return out
			}
		case ',':
			if depth == 1 {
				alts = append(alts, p[start:i])
				start = i + 1
			}
		}
	}
	return []string{p} // unbalanced: a literal brace
}
