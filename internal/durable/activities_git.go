package durable

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/aot-loop/aot/internal/workspace"
)

// A worker's cache folder holds:
//
//	repos/<slug>/        one clone per repository (git clone --no-checkout)
//	repos/<slug>.lock    held while the clone is fetched or its worktrees change
//	work/wt-*/           one worktree per running activity
//	work/wt-*.lock       held while the activity runs: a worktree whose lock
//	                     nobody holds is left by a worker that died
//	logs/<loop>/         the agents' logs, one file per attempt

// cleanupTimeout bounds the cleanup that goes on after an activity's
// context has ended: a cancelled attempt must still leave nothing behind.
const cleanupTimeout = time.Minute

// lockPoll is how often a busy lock is tried again.
const lockPoll = 20 * time.Millisecond

// gitLine runs git in dir and returns its output, trimmed.
func gitLine(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := workspace.Git(ctx, dir, args...)
	return strings.TrimSpace(string(out)), err
}

// nulSplit splits git's -z output.
func nulSplit(out []byte) []string {
	var parts []string
	for _, p := range bytes.Split(out, []byte{0}) {
		if s := strings.TrimPrefix(string(p), "\n"); s != "" {
			parts = append(parts, s)
		}
	}
	return parts
}

// nameFor makes a folder name of s: readable, and distinct for distinct s.
func nameFor(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	short := strings.Trim(b.String(), "-.")
	if len(short) > 48 {
		short = short[len(short)-48:]
	}
	sum := sha256.Sum256([]byte(s))
	return short + "-" + hex.EncodeToString(sum[:])[:12]
}

// clone is the worker's clone of one repository.
type clone struct {
	url      string
	dir      string
	lockPath string
}

// withLock runs fn holding the clone's lock, which other goroutines and
// other workers sharing the cache folder take too.
func (c *clone) withLock(ctx context.Context, fn func() error) error {
	l := flock.New(c.lockPath)
	ok, err := l.TryLockContext(ctx, lockPoll)
	if err != nil || !ok {
		return fmt.Errorf("lock the clone of %s: %w", c.url, errors.Join(err, ctx.Err()))
	}
	defer l.Unlock()
	return fn()
}

// openClone returns the clone of url in the cache, made on first use, and
// fetched: every branch of the remote is then under refs/remotes/origin/.
func (a *Activities) openClone(ctx context.Context, url string) (*clone, error) {
	if url == "" {
		return nil, nonRetryable(errors.New("no repository given"))
	}
	repos := filepath.Join(a.Cache, "repos")
	if err := os.MkdirAll(repos, 0o755); err != nil {
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	name := nameFor(url)
	c := &clone{url: url, dir: filepath.Join(repos, name), lockPath: filepath.Join(repos, name+".lock")}
	err := c.withLock(ctx, func() error {
		if _, err := os.Stat(filepath.Join(c.dir, ".git")); err != nil {
			// Clone beside, then rename: a clone cut short leaves no clone.
			tmp, err := os.MkdirTemp(repos, ".clone-*")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			if _, err := workspace.Git(ctx, repos, "clone", "--quiet", "--no-checkout", url, tmp); err != nil {
				return fmt.Errorf("clone %s: %w", url, err)
			}
			os.RemoveAll(c.dir)
			if err := os.Rename(tmp, c.dir); err != nil {
				return err
			}
		}
		return c.fetchHeld(ctx)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// fetch brings the clone up to date with its remote again.
func (c *clone) fetch(ctx context.Context) error {
	return c.withLock(ctx, func() error { return c.fetchHeld(ctx) })
}

// fetchHeld fetches with the clone's lock held.
func (c *clone) fetchHeld(ctx context.Context) error {
	if _, err := workspace.Git(ctx, c.dir, "fetch", "--quiet", "--prune", "--no-tags", "origin", "+refs/heads/*:refs/remotes/origin/*"); err != nil {
		return fmt.Errorf("fetch %s: %w", c.url, err)
	}
	return nil
}

// resolve returns the commit rev names in the clone, "" when it has none.
func (c *clone) resolve(ctx context.Context, rev string) string {
	id, err := gitLine(ctx, c.dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return ""
	}
	return id
}

// worktree is one activity's checkout, detached at a commit.
type worktree struct {
	c    *clone
	dir  string
	lock *flock.Flock
}

// addWorktree checks commit out in a fresh folder of the cache's work/.
func (a *Activities) addWorktree(ctx context.Context, c *clone, commit string) (*worktree, error) {
	work := filepath.Join(a.Cache, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	dir, err := os.MkdirTemp(work, "wt-")
	if err != nil {
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	w := &worktree{c: c, dir: dir, lock: flock.New(dir + ".lock")}
	if err := w.lock.Lock(); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	err = c.withLock(ctx, func() error {
		_, err := workspace.Git(ctx, c.dir, "worktree", "add", "--quiet", "--detach", dir, commit)
		return err
	})
	if err != nil {
		w.remove()
		return nil, fmt.Errorf("check out %s of %s: %w", short(commit), c.url, err)
	}
	return w, nil
}

// remove deletes the worktree and its registration in the clone; it goes
// on after the activity's context has ended.
func (w *worktree) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = w.c.withLock(ctx, func() error {
		if _, err := workspace.Git(ctx, w.c.dir, "worktree", "remove", "--force", "--force", w.dir); err != nil {
			os.RemoveAll(w.dir)
			workspace.Git(ctx, w.c.dir, "worktree", "prune")
		}
		return nil
	})
	os.RemoveAll(w.dir)
	w.lock.Unlock()
	os.Remove(w.lock.Path())
}

// sweep removes the worktrees that workers which died left in the cache
// (their lock is free) and prunes their registrations from the clones.
func (a *Activities) sweep(ctx context.Context) (removed int) {
	work := filepath.Join(a.Cache, "work")
	entries, _ := os.ReadDir(work)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "wt-") {
			continue
		}
		dir := filepath.Join(work, e.Name())
		l := flock.New(dir + ".lock")
		if ok, err := l.TryLock(); err != nil || !ok {
			continue // a running activity's
		}
		os.RemoveAll(dir)
		l.Unlock()
		os.Remove(dir + ".lock")
		removed++
	}
	if removed == 0 {
		return 0
	}
	repos := filepath.Join(a.Cache, "repos")
	entries, _ = os.ReadDir(repos)
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		c := &clone{url: e.Name(), dir: filepath.Join(repos, e.Name()), lockPath: filepath.Join(repos, e.Name()+".lock")}
		_ = c.withLock(ctx, func() error {
			_, err := workspace.Git(ctx, c.dir, "worktree", "prune")
			return err
		})
	}
	return removed
}

// commitAll commits everything changed in the worktree since base as one
// commit on base (the agent's own commits, if it made any, are folded in).
// It returns "" and no files when nothing changed.
func (w *worktree) commitAll(ctx context.Context, base, message string) (string, []string, error) {
	if _, err := workspace.Git(ctx, w.dir, "add", "-A", "--", "."); err != nil {
		return "", nil, err
	}
	tree, err := gitLine(ctx, w.dir, "write-tree")
	if err != nil {
		return "", nil, err
	}
	baseTree, err := gitLine(ctx, w.dir, "rev-parse", base+"^{tree}")
	if err != nil {
		return "", nil, err
	}
	if tree == baseTree {
		return "", nil, nil
	}
	commit, err := gitLine(ctx, w.dir, "commit-tree", tree, "-p", base, "-m", message)
	if err != nil {
		return "", nil, err
	}
	files, err := changedFiles(ctx, w.dir, base, commit)
	return commit, files, err
}

// changedFiles lists the files that differ between two commits.
func changedFiles(ctx context.Context, dir, from, to string) ([]string, error) {
	out, err := workspace.Git(ctx, dir, "diff-tree", "-r", "-z", "--no-renames", "--name-only", from, to)
	if err != nil {
		return nil, err
	}
	return nulSplit(out), nil
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
