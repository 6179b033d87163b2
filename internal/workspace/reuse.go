package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// A worktree can serve one attempt after another: [Manager.Release] ends an
// attempt keeping its worktree, and [Manager.Reuse] makes the next
// attempt's worktree out of it, which touches only the files that differ
// where adding a worktree checks every file out. A Temporal worker keeps
// such worktrees in its clone of the repository, one per attempt it runs
// at once.

// Reuse makes a's worktree out of the worktree at a.Path that an earlier
// attempt in the same repository left with [Manager.Release]: a's branch
// at the integration branch's commit is checked out, everything else in
// the folder (changes, untracked and ignored files) is deleted, and the
// worktree's own HEAD log starts anew, so that the commits of earlier
// attempts are not taken for commits the agent made on another branch.
// a.Path may be anywhere outside the repository's working trees; the
// caller chose it. An error leaves the worktree for the caller to remove.
func (m *Manager) Reuse(ctx context.Context, a Attempt) error {
	head, err := m.startedAt("Reuse")
	if err != nil {
		return err
	}
	admin, err := worktreeAdmin(a.Path)
	if err != nil {
		return fmt.Errorf("workspace: reuse %s: %w", a.Path, err)
	}
	// An agent may have rewritten the .git file: git runs there only when
	// it still names a worktree of this repository.
	if !strings.HasPrefix(realPath(admin), filepath.Join(m.common, "worktrees")+string(filepath.Separator)) {
		return fmt.Errorf("workspace: reuse %s: its .git names %s, not a worktree of %s", a.Path, admin, m.common)
	}
	if err := os.Remove(filepath.Join(admin, "logs", "HEAD")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("workspace: reuse %s: %w", a.Path, err)
	}
	if _, err := m.git(ctx, a.Path, "checkout", "-q", "-f", "--no-guess", "-B", a.Branch, head); err != nil {
		return fmt.Errorf("workspace: reuse %s: %w", a.Path, err)
	}
	afterCheckout(admin)
	if _, err := m.git(ctx, a.Path, "clean", "-q", "-ffdx"); err != nil {
		return fmt.Errorf("workspace: reuse %s: %w", a.Path, err)
	}
	// The worktree must be head's, file for file: an index that went
	// missing between the checkout and the clean (seen under load, cause
	// unknown) makes the clean delete every file, and the attempt's commit
	// would then delete them from the integration branch. One git process
	// checks it; the caller makes a new worktree instead.
	if _, err := m.git(ctx, a.Path, "diff-index", "--quiet", "HEAD", "--"); err != nil {
		reuseRefusals.Add(1)
		return fmt.Errorf("workspace: reuse %s: the worktree is not %s after its checkout: %w", a.Path, head, err)
	}
	m.protect.removeFrom(a.Path)
	m.setBase(a.Branch, head)
	return nil
}

// reuseRefusals counts the worktrees Reuse found not to be their start
// after its checkout and clean.
var reuseRefusals atomic.Int64

// ReuseRefusals is how many worktrees this process's Reuse refused because
// they were not their start after the checkout and clean.
func ReuseRefusals() int64 { return reuseRefusals.Load() }

// afterCheckout is called by Reuse between its checkout and its clean,
// with the worktree's folder in the repository's .git (tests inject
// faults there).
var afterCheckout = func(admin string) {}

// CreateAt is [Manager.Create] at a.Path, a folder the caller chose outside
// the repository's working trees (a worktree it means to [Manager.Reuse]).
// Two worktrees must not be added to one repository at once: the caller
// serializes CreateAt across managers.
func (m *Manager) CreateAt(ctx context.Context, a Attempt) error {
	return m.create(ctx, a)
}

// Release ends a's attempt keeping its worktree for [Manager.Reuse]: a's
// branch is deleted (the worktree is then on a branch without commits,
// which Reuse leaves). It goes on when ctx is already cancelled, bounded
// by a minute.
func (m *Manager) Release(ctx context.Context, a Attempt) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, err := m.git(ctx, a.Path, "update-ref", "-d", "refs/heads/"+a.Branch)
	m.setBase(a.Branch, "")
	if err != nil {
		return fmt.Errorf("workspace: release %s: %w", a.Branch, err)
	}
	return nil
}

// worktreeAdmin is the folder in the repository's .git that holds the
// worktree at dir's own files, read from dir's .git file.
func worktreeAdmin(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return "", err
	}
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	if !ok || admin == "" {
		return "", fmt.Errorf("%s is not a worktree", dir)
	}
	if !filepath.IsAbs(admin) {
		admin = filepath.Join(dir, admin)
	}
	return admin, nil
}

// setBase records the commit attempt branch was made at; "" forgets it.
func (m *Manager) setBase(branch, commit string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if commit == "" {
		delete(m.bases, branch)
		return
	}
	m.bases[branch] = commit
}

// Detached is a new manager of m's loop in m's repository, started
// detached at commit ([Manager.StartDetached]), that shares nothing
// mutable with m: what [Open] learnt from git is not asked again. A
// Temporal worker opens one manager per loop and takes one of these per
// attempt.
func (m *Manager) Detached(commit string) *Manager {
	n := &Manager{env: m.env, root: m.root, rel: m.rel, common: m.common, loop: m.loop, loopDir: m.loopDir,
		intPath: m.intPath, intBranch: m.intBranch, attemptRef: m.attemptRef, metaPath: m.metaPath,
		keepFailed: m.keepFailed, protect: m.protect, bases: map[string]string{}}
	n.StartDetached(commit)
	return n
}

// startedAt is the integration branch's commit, or an error naming op when
// the manager has not started.
func (m *Manager) startedAt(op string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return "", errors.New("workspace: " + op + " before Start")
	}
	return m.head, nil
}
