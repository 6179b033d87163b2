package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// worktree is one entry of git worktree list.
type worktree struct {
	path, branch string
	locked       bool
	reason       string
}

// worktrees lists the repository's worktrees.
func (m *Manager) worktrees(ctx context.Context, dir string) ([]worktree, error) {
	out, err := m.git(ctx, dir, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var all []worktree
	var cur *worktree
	for _, field := range strings.Split(string(out), "\x00") {
		key, value, _ := strings.Cut(field, " ")
		switch key {
		case "worktree":
			all = append(all, worktree{path: filepath.Clean(value)})
			cur = &all[len(all)-1]
		case "branch":
			if cur != nil {
				cur.branch = strings.TrimPrefix(value, "refs/heads/")
			}
		case "locked":
			if cur != nil {
				cur.locked, cur.reason = true, value
			}
		}
	}
	return all, nil
}

// attemptFrom recovers an attempt from its worktree folder or branch.
func (m *Manager) attemptFrom(p, branch string) Attempt {
	name := filepath.Base(p)
	if p == "" {
		name = strings.TrimPrefix(branch, m.attemptRef)
	}
	a := Attempt{Atom: name, Path: filepath.Join(m.loopDir, name), Branch: m.attemptRef + name}
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil {
			a.Atom, a.Number = name[:i], n
		}
	}
	a.Dir = m.inProject(a.Path)
	return a
}

// CleanOrphans removes the worktrees, branches and folders of this loop's
// attempts that a crashed run left, except the kept ones (see
// [Manager.Abandon]) and those keep reports true for (keep may be nil). It
// returns what it removed. Call it before [Manager.Start]; it goes on when
// ctx is already cancelled, bounded by a minute.
func (m *Manager) CleanOrphans(ctx context.Context, keep func(Attempt) bool) ([]Attempt, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	dir := m.runDir()
	wts, err := m.worktrees(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: orphans: %w", err)
	}
	seen := map[string]bool{} // attempt names already decided
	var orphans []Attempt
	consider := func(a Attempt, kept bool) {
		name := filepath.Base(a.Path)
		if seen[name] {
			return
		}
		seen[name] = true
		if kept || (keep != nil && keep(a)) {
			return
		}
		orphans = append(orphans, a)
	}
	for _, w := range wts {
		if filepath.Dir(w.path) == m.loopDir && w.path != m.intPath {
			// Worktrees in use are locked too: only a kept one stays.
			consider(m.attemptFrom(w.path, w.branch), w.locked && strings.HasPrefix(w.reason, lockReason))
		}
	}
	refs, err := m.git(ctx, dir, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/"+m.attemptRef)
	if err != nil {
		return nil, fmt.Errorf("workspace: orphans: %w", err)
	}
	for _, b := range strings.Fields(string(refs)) {
		consider(m.attemptFrom("", b), false)
	}
	entries, _ := os.ReadDir(m.loopDir)
	for _, e := range entries {
		p := filepath.Join(m.loopDir, e.Name())
		if e.IsDir() && p != m.intPath {
			consider(m.attemptFrom(p, ""), false)
		}
	}
	slices.SortFunc(orphans, func(x, y Attempt) int { return strings.Compare(x.Path, y.Path) })
	var removed []Attempt
	for _, a := range orphans {
		if err := m.Remove(ctx, a); err != nil {
			return removed, fmt.Errorf("workspace: orphans: %w", err)
		}
		removed = append(removed, a)
	}
	return removed, nil
}

// Kept lists the attempts [Manager.Abandon] kept, for aot status. A person
// removes one with git worktree remove --force --force PATH and
// git branch -D BRANCH, or the engine with [Manager.Remove].
func (m *Manager) Kept(ctx context.Context) ([]Attempt, error) {
	wts, err := m.worktrees(ctx, m.runDir())
	if err != nil {
		return nil, fmt.Errorf("workspace: kept: %w", err)
	}
	var kept []Attempt
	for _, w := range wts {
		if filepath.Dir(w.path) == m.loopDir && w.locked && strings.HasPrefix(w.reason, lockReason) {
			a := m.attemptFrom(w.path, w.branch)
			if w.branch != "" {
				a.Branch = w.branch
			}
			kept = append(kept, a)
		}
	}
	return kept, nil
}
