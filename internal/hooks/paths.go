package hooks

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aot-loop/aot/internal/journal"
)

// maxLinks bounds the symbolic links followed in one path, as the kernel
// does (ELOOP).
const maxLinks = 40

// resolve returns the absolute path p names once every symbolic link in it
// is followed, component by component as the kernel does, so that a ".."
// after a link climbs from the link's target. A link whose target does not
// exist yet counts as that target (a write through it creates the target);
// a component that does not exist is taken as written. ok is false when a
// component cannot be examined or links nest too deep: no approval then.
func resolve(p string) (string, bool) {
	if !filepath.IsAbs(p) {
		return "", false
	}
	todo := strings.Split(filepath.ToSlash(p), "/")
	cur := string(filepath.Separator)
	links := 0
	missing := false // cur does not exist: what follows is taken as written
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		if missing {
			cur = next
			continue
		}
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = true
			cur = next
			continue
		case err != nil:
			return "", false
		case fi.Mode()&fs.ModeSymlink == 0:
			cur = next
			continue
		}
		links++
		target, err := os.Readlink(next)
		if err != nil || links > maxLinks {
			return "", false
		}
		if filepath.IsAbs(target) {
			cur = string(filepath.Separator)
		}
		todo = append(strings.Split(filepath.ToSlash(target), "/"), todo...)
	}
	return cur, true
}

// within reports whether p is dir or inside it (both resolved). fold
// compares without regard to case, for what is guarded: on a
// case-insensitive file system (macOS, Windows) .Claude is .claude.
func within(p, dir string, fold bool) bool {
	if fold {
		p, dir = strings.ToLower(p), strings.ToLower(dir)
	}
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// guarded lists, resolved, what no approved tool may touch: the project's
// .claude folder (the client's settings and the loop's files), with git
// its .git folder, and wherever the state file lives, the state file and
// its aot-loop folder. ok is false when one cannot be resolved.
func (l *loop) guarded(git bool) ([]string, bool) {
	root, ok := resolve(l.root)
	if !ok {
		return nil, false
	}
	out := []string{filepath.Join(root, ".claude")}
	if git {
		out = append(out, filepath.Join(root, ".git"))
	}
	for _, p := range []string{l.path, journal.DirFor(l.path)} {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, false
		}
		r, ok := resolve(abs)
		if !ok {
			return nil, false
		}
		out = append(out, r)
	}
	return out, true
}

// writable reports whether a write to p (absolute, or relative to cwd) may
// be approved: once resolved it is inside the project and in nothing
// guarded.
func (l *loop) writable(p, cwd string) bool {
	if p == "" {
		return false
	}
	if !filepath.IsAbs(p) {
		if cwd == "" || !filepath.IsAbs(cwd) {
			cwd = l.root
		}
		p = cwd + string(filepath.Separator) + p // not Join: a ".." must follow links first
	}
	target, ok := resolve(p)
	if !ok {
		return false
	}
	root, ok := resolve(l.root)
	if !ok || !within(target, root, false) || target == root {
		return false
	}
	guarded, ok := l.guarded(true)
	if !ok {
		return false
	}
	for _, g := range guarded {
		if within(target, g, true) {
			return false
		}
	}
	return true
}
