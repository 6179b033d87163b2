package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/aot-loop/aot/internal/state"
)

// maxListedMatches caps FileResult.Matches; the evidence still gives the count.
const maxListedMatches = 50

// FileResult is the outcome of one file or not_file check.
type FileResult struct {
	Passed   bool     `json:"passed"`
	Type     string   `json:"type"` // file or not_file
	Path     string   `json:"path"`
	Exists   bool     `json:"exists"`
	Evidence string   `json:"evidence"`
	Matches  []string `json:"matches,omitempty"`
}

// File checks that pattern names something that exists (or, with
// expectMissing, that it names nothing). pattern is relative to dir unless
// absolute, may start with ~ for the home directory, and may be a glob: * ? [..]
// and {a,b} within a name, ** across directories; dotfiles match like any
// other name. A path that exists literally is taken as is, even if it holds
// glob characters. A directory counts as existing. A FIFO, socket or device
// fails both checks at once: it is looked at with stat only, never opened
// (a FIFO would block), and it is neither a file nor absent.
func File(dir, pattern string, expectMissing bool) FileResult {
	res := FileResult{Type: "file", Path: pattern}
	if expectMissing {
		res.Type = "not_file"
	}
	if strings.TrimSpace(pattern) == "" {
		res.Evidence = "No path given: an empty path verifies nothing"
		return res
	}
	full, err := resolvePath(dir, pattern)
	if err != nil {
		res.Evidence = fmt.Sprintf("Cannot check path %s: %v", pattern, err)
		return res
	}

	info, statErr := os.Stat(full)
	switch {
	case statErr == nil:
		res.Exists = true
		if !info.Mode().IsRegular() && !info.IsDir() {
			res.Evidence = fmt.Sprintf("Path is %s, not a regular file: %s", state.FileKind(info.Mode()), pattern)
			return res
		}
		what := fmt.Sprintf("File exists (%s)", formatSize(info.Size()))
		if info.IsDir() {
			what = fmt.Sprintf("Directory exists with %d files", countFiles(full))
		}
		return res.decide(true, what, what+" (expected missing)")
	case isSymlink(full):
		// The entry is there but points nowhere: neither a usable file nor absent.
		res.Exists = true
		res.Evidence = fmt.Sprintf("Path is a broken symbolic link: %s", pattern)
		return res
	case !errors.Is(statErr, fs.ErrNotExist):
		res.Evidence = fmt.Sprintf("Cannot check path %s: %v", pattern, statErr)
		return res
	}

	if !isGlob(pattern) {
		return res.decide(false, "Path not found", "Path does not exist (as expected)")
	}
	matches, err := globMatches(dir, pattern, expectMissing)
	if err != nil {
		// Part of the tree could not be read, so "nothing matches" is unproven.
		res.Evidence = fmt.Sprintf("Cannot search all of pattern %s: %v", pattern, err)
		return res
	}
	if len(matches) == 0 {
		return res.decide(false, "No files match pattern", "No files match pattern (as expected)")
	}
	res.Exists = true
	res.Matches = matches
	if len(res.Matches) > maxListedMatches {
		res.Matches = res.Matches[:maxListedMatches]
	}
	what := fmt.Sprintf("%d files match pattern", len(matches))
	return res.decide(true, what, what+" (expected none)")
}

// decide sets Passed and Evidence from what was found, with the wording of
// the positive check (ok) or the negative one (notOK); the path is appended.
func (r FileResult) decide(found bool, ok, notOK string) FileResult {
	negative := r.Type == "not_file"
	r.Passed = found != negative
	msg := ok
	if negative {
		msg = notOK
	}
	r.Evidence = msg + ": " + r.Path
	return r
}

// resolvePath expands a leading ~ and makes p relative to dir.
func resolvePath(dir, p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, "~"+string(filepath.Separator)) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = home + p[1:]
	}
	if filepath.IsAbs(p) {
		return p, nil
	}
	return filepath.Join(dir, p), nil
}

func isGlob(p string) bool { return strings.ContainsAny(p, "*?[{") }

func isSymlink(p string) bool {
	info, err := os.Lstat(p)
	return err == nil && info.Mode()&fs.ModeSymlink != 0
}

// globMatches returns the paths matching pattern, written the way the
// pattern is (relative to dir when the pattern is). Symbolic links to
// directories are not followed, so a link cycle cannot make the walk endless.
// For a negative check, unreadable directories are an error: what they hide
// might match.
func globMatches(dir, pattern string, failOnIOErrors bool) ([]string, error) {
	full, err := resolvePath(dir, pattern)
	if err != nil {
		return nil, err
	}
	if filepath.Separator != '/' {
		full = filepath.ToSlash(full)
	}
	full = path.Clean(full)
	if !doublestar.ValidatePattern(full) {
		return nil, nil // not a valid glob: only the literal path could have matched
	}
	base, rest := doublestar.SplitPattern(full)
	opts := []doublestar.GlobOption{doublestar.WithNoFollow()}
	if failOnIOErrors {
		opts = append(opts, doublestar.WithFailOnIOErrors())
	}
	found, err := doublestar.Glob(os.DirFS(filepath.FromSlash(base)), rest, opts...)
	if err != nil {
		return nil, err
	}
	// Show matches relative to dir when the user wrote a relative pattern.
	shownBase := base
	if rel, ok := relativeTo(dir, base); ok && !filepath.IsAbs(pattern) && !strings.HasPrefix(pattern, "~") {
		shownBase = rel
	}
	for i, m := range found {
		found[i] = filepath.FromSlash(path.Join(shownBase, m))
	}
	return found, nil
}

// relativeTo returns target relative to dir when it lies inside it.
func relativeTo(dir, target string) (string, bool) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	absTarget, err := filepath.Abs(filepath.FromSlash(target))
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(absDir, absTarget)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// countFiles counts the regular files under dir, hidden ones included.
func countFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// formatSize writes a size in 1024-based units with one decimal.
func formatSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%dB", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1fKB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1fMB", float64(n)/(1024*1024))
	}
}
