package durable

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/aot-loop/aot/internal/workspace"
)

// A worker's cache folder holds:
//
//	repos/<slug>/        one clone per repository (git clone --no-checkout),
//	                     fetched before each activity: the objects every
//	                     activity's repository shares
//	repos/<slug>.lock    held while the clone is fetched
//	work/wt-*/           one folder per running activity: for a worker
//	                     attempt, the note of the worktree it holds in
//	                     trees/; for the others a repository (git clone
//	                     --shared of the clone: nothing copied) and the
//	                     worktrees a workspace.Manager makes in it
//	trees/<slug>/t-*/    the worktrees of the clone that worker attempts
//	                     take one after another (attempt_tree.go);
//	                     t-*.free marks one no attempt holds
//	repos/<slug>.worktrees.lock  held while a worktree is added or removed
//	work/wt-*.lock       held while the activity runs: a folder whose lock
//	                     nobody holds was left by a worker that died
//	work/wt-*.trees      the activity's agent process trees (orphans.go)
//	logs/<loop>/         the agents' logs, one file per attempt
//
// The commits, merges and checkouts themselves are workspace's, as in a
// local run: the engine's own files are never committed, the same
// conflict rule holds, the same trailers name loop, atom and attempt.

// cleanupTimeout bounds the cleanup that goes on after an activity's
// context has ended: a cancelled attempt must still leave nothing behind.
const cleanupTimeout = time.Minute

// lockPoll is how often a busy lock is tried again.
const lockPoll = 20 * time.Millisecond

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
	c, _, err := a.cloneOf(ctx, url, true)
	return c, err
}

// cloneOf returns the clone of url in the cache, made on first use (which
// fetches everything: fetched is true), and fetched when fetch is set.
func (a *Activities) cloneOf(ctx context.Context, url string, fetch bool) (c *clone, fetched bool, err error) {
	if url == "" {
		return nil, false, nonRetryable(errors.New("no repository given"))
	}
	repos := filepath.Join(a.Cache, "repos")
	if err := os.MkdirAll(repos, 0o755); err != nil {
		return nil, false, fmt.Errorf("cache folder: %w", err)
	}
	name := nameFor(url)
	c = &clone{url: url, dir: filepath.Join(repos, name), lockPath: filepath.Join(repos, name+".lock")}
	err = c.withLock(ctx, func() error {
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
			c.forget()
			if err := os.Rename(tmp, c.dir); err != nil {
				return err
			}
			fetched = true
			return nil
		}
		if !fetch {
			return nil
		}
		fetched = true
		return c.fetchHeld(ctx)
	})
	if err != nil {
		return nil, false, err
	}
	return c, fetched, nil
}

// fetch brings the clone up to date with its remote again.
func (c *clone) fetch(ctx context.Context) error {
	return c.withLock(ctx, func() error { return c.fetchHeld(ctx) })
}

// fetchHeld fetches with the clone's lock held.
func (c *clone) fetchHeld(ctx context.Context) error {
	// No FETCH_HEAD and no look for forced updates: nothing reads them, and
	// they are a quarter of a fetch from a remote on the same machine.
	// Never while a worktree is added: git writes a new worktree's HEAD as
	// zeros first, and a fetch's check of what it has reads every
	// worktree's HEAD ("bad object worktrees/wt/HEAD").
	return c.withTreeLock(ctx, func() error {
		if _, err := workspace.Git(ctx, c.dir, "-c", "fetch.showForcedUpdates=false", "fetch", "--quiet", "--prune", "--no-tags", "--no-write-fetch-head",
			"origin", "+refs/heads/*:refs/remotes/origin/*"); err != nil {
			return fmt.Errorf("fetch %s: %w", c.url, err)
		}
		return nil
	})
}

// resolve returns the commit rev names in the clone, "" when it has none.
func (c *clone) resolve(ctx context.Context, rev string) string {
	out, err := workspace.Git(ctx, c.dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// remoteBranch is the commit of the remote's branch as last fetched, ""
// when it has none.
func (c *clone) remoteBranch(ctx context.Context, branch string) string {
	return c.resolve(ctx, "refs/remotes/origin/"+branch)
}

// scratch is one activity's repository: a clone sharing the worker's
// clone's objects, its HEAD at the commit the activity works on, and the
// folder where a workspace.Manager makes its worktrees. It is removed
// whole when the activity ends; its lock, held meanwhile, tells the sweep
// that it is in use.
type scratch struct {
	dir  string // work/wt-*
	repo string // dir/repo
	lock *flock.Flock
}

// newScratch makes an activity's repository with HEAD at head.
func (a *Activities) newScratch(ctx context.Context, c *clone, head string) (*scratch, error) {
	s, err := a.workFolder()
	if err != nil {
		return nil, err
	}
	s.repo = filepath.Join(s.dir, "repo")
	err = c.withLock(ctx, func() error {
		_, err := workspace.Git(ctx, s.dir, "clone", "--quiet", "--shared", "--no-checkout", c.dir, s.repo)
		return err
	})
	if err == nil {
		_, err = workspace.Git(ctx, s.repo, "update-ref", "--no-deref", "HEAD", head)
	}
	if err != nil {
		s.remove()
		return nil, fmt.Errorf("a repository at %s of %s: %w", short(head), c.url, err)
	}
	return s, nil
}

// manager opens the workspace of loop in the scratch repository: the
// project's folder in it, the state file (repository-relative, "" for
// the default beside the project) whose files are never committed, and
// the integration branch started at HEAD.
func (s *scratch) manager(ctx context.Context, loop, project, stateFile string) (*workspace.Manager, error) {
	dir := s.repo
	if p := strings.Trim(project, "/"); p != "" && !filepath.IsAbs(project) {
		dir = filepath.Join(s.repo, filepath.FromSlash(p))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	o := workspace.Options{LoopID: loop, Dir: filepath.Join(s.dir, "wt")}
	if stateFile != "" && !filepath.IsAbs(stateFile) {
		o.StateFile = filepath.Join(s.repo, filepath.FromSlash(stateFile))
	}
	m, err := workspace.Open(ctx, dir, o)
	if err != nil {
		return nil, err
	}
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// rootOf is the root of a checkout whose project folder is dir.
func rootOf(dir, project string) string {
	p := strings.Trim(project, "/")
	if p == "" || filepath.IsAbs(project) {
		return dir
	}
	return strings.TrimSuffix(dir, string(filepath.Separator)+filepath.FromSlash(p))
}

// remove deletes the scratch repository with its worktrees; it goes on
// after the activity's context has ended.
func (s *scratch) remove() {
	os.RemoveAll(s.dir)
	os.Remove(treesPath(s.dir))
	s.lock.Unlock()
	os.Remove(s.lock.Path())
}

// sweep removes the activities' folders that workers which died left in
// the cache (their lock is free), and the worktree registrations that
// workers of earlier versions left in the clones.
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
		killLeftTrees(dir) // orphans.go
		if slot, err := os.ReadFile(filepath.Join(dir, slotNote)); err == nil && len(slot) > 0 {
			os.RemoveAll(string(slot)) // its worktree, half used (attempt_tree.go)
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
		_ = c.withTreeLock(ctx, func() error {
			_, err := workspace.Git(ctx, c.dir, "worktree", "prune")
			return err
		})
		a.sweepTrees(ctx, c)
	}
	return removed
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// sweepTrees removes from c the worktrees (and their branches) that
// attempts of dead workers made in it: those whose folder in the cache
// (work/ or trees/) is gone.
func (a *Activities) sweepTrees(ctx context.Context, c *clone) {
	out, err := workspace.Git(ctx, c.dir, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return
	}
	var ours []string
	for _, d := range []string{filepath.Join(a.Cache, "work"), filepath.Join(a.Cache, "trees")} {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			d = real
		}
		ours = append(ours, d+string(filepath.Separator))
	}
	var path, branch string
	gone := func() {
		defer func() { path, branch = "", "" }()
		if path == "" || !slices.ContainsFunc(ours, func(d string) bool { return strings.HasPrefix(path, d) }) {
			return
		}
		if _, err := os.Stat(path); err == nil {
			return
		}
		_ = c.withTreeLock(ctx, func() error {
			_, err := workspace.Git(ctx, c.dir, "worktree", "remove", "--force", "--force", path)
			if err == nil && branch != "" {
				_, err = workspace.Git(ctx, c.dir, "update-ref", "-d", branch)
			}
			return err
		})
	}
	for _, field := range strings.Split(string(out), "\x00") {
		switch {
		case strings.HasPrefix(field, "worktree "):
			path = strings.TrimPrefix(field, "worktree ")
		case strings.HasPrefix(field, "branch "):
			branch = strings.TrimPrefix(field, "branch ")
		case field == "":
			gone()
		}
	}
	gone()
}
