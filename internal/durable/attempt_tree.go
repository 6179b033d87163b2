package durable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gofrs/flock"

	"github.com/aot-loop/aot/internal/workspace"
)

// A worker attempt needs only its own worktree: it makes it in the
// worker's clone of the repository itself (no repository per attempt, no
// integration worktree), inside a work/wt-* folder whose lock tells the
// sweep it is in use. The clone is fetched only when it lacks the commit
// the attempt starts from. Its branch, aot-attempt/<loop>/<atom>-<n>-wt-*,
// is named after that folder, so that two attempts in one clone never
// want the same branch, whatever a dead worker left.

// treeLocks serializes, per clone, the worktrees added to and removed from
// it by this process; the clone's .worktrees lock file does it between
// processes sharing the cache folder.
var treeLocks sync.Map // clone folder -> *sync.Mutex

// withTreeLock runs fn alone among the worktree changes of c's clone.
func (c *clone) withTreeLock(ctx context.Context, fn func() error) error {
	mu, _ := treeLocks.LoadOrStore(c.dir, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	l := flock.New(c.dir + ".worktrees.lock")
	ok, err := l.TryLockContext(ctx, lockPoll)
	if err != nil || !ok {
		return fmt.Errorf("lock the worktrees of %s: %w", c.url, errors.Join(err, ctx.Err()))
	}
	defer l.Unlock()
	return fn()
}

// cloneHaving is [Activities.openClone] that does not fetch when the clone
// already holds commit; a repository without commit is a non-retryable
// error.
func (a *Activities) cloneHaving(ctx context.Context, url, commit string) (*clone, error) {
	if url != "" {
		repos := filepath.Join(a.Cache, "repos")
		name := nameFor(url)
		c := &clone{url: url, dir: filepath.Join(repos, name), lockPath: filepath.Join(repos, name+".lock")}
		if _, err := os.Stat(filepath.Join(c.dir, ".git")); err == nil && c.resolve(ctx, commit) != "" {
			return c, nil
		}
	}
	c, err := a.openClone(ctx, url)
	if err != nil {
		return nil, err
	}
	if c.resolve(ctx, commit) == "" {
		return nil, nonRetryable(fmt.Errorf("%s has no commit %s", url, commit))
	}
	return c, nil
}

// workFolder makes an activity's folder in work/, locked (its repo is
// for the caller to set).
func (a *Activities) workFolder() (*scratch, error) {
	work := filepath.Join(a.Cache, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	dir, err := os.MkdirTemp(work, "wt-")
	if err != nil {
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	s := &scratch{dir: dir, lock: flock.New(dir + ".lock")}
	if err := s.lock.Lock(); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	return s, nil
}

// attemptTree is a worker attempt's worktree in the worker's clone.
type attemptTree struct {
	c  *clone
	sc *scratch
	m  *workspace.Manager
	a  workspace.Attempt
}

// newAttemptTree makes the worktree of attempt n of atom at head in c:
// the project's folder in it, the state file (repository-relative, ""
// for the default beside the project) whose files are never committed.
func (a *Activities) newAttemptTree(ctx context.Context, c *clone, head, loop, project, stateFile, atom string, n int) (*attemptTree, error) {
	sc, err := a.workFolder()
	if err != nil {
		return nil, err
	}
	sc.repo = c.dir
	dir, t := sc.dir, &attemptTree{c: c, sc: sc}
	in := c.dir
	if p := strings.Trim(project, "/"); p != "" && !filepath.IsAbs(project) {
		in = filepath.Join(c.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(in, 0o755); err != nil {
			t.remove(ctx)
			return nil, fmt.Errorf("cache folder: %w", err)
		}
	}
	o := workspace.Options{LoopID: loop, Dir: filepath.Join(dir, "wt")}
	if stateFile != "" && !filepath.IsAbs(stateFile) {
		o.StateFile = filepath.Join(c.dir, filepath.FromSlash(stateFile))
	}
	if t.m, err = workspace.Open(ctx, in, o); err != nil {
		t.remove(ctx)
		return nil, err
	}
	t.m.StartDetached(head)
	t.a = t.m.Plan(atom, n)
	t.a.Branch += "-" + filepath.Base(dir)
	if err := c.withTreeLock(ctx, func() error { return t.m.Create(ctx, t.a) }); err != nil {
		t.remove(ctx)
		return nil, err
	}
	return t, nil
}

// remove deletes the worktree, its branch and its folder; it goes on after
// ctx has ended.
func (t *attemptTree) remove(ctx context.Context) {
	if t.m != nil && t.a.Path != "" {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = t.c.withTreeLock(ctx, func() error { return t.m.Remove(ctx, t.a) })
		cancel()
	}
	t.sc.remove()
}

// sweepTrees removes from c the worktrees (and their branches) that
// attempts of dead workers made in it: those whose folder in the cache is
// gone.
func (a *Activities) sweepTrees(ctx context.Context, c *clone) {
	out, err := workspace.Git(ctx, c.dir, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return
	}
	work := filepath.Join(a.Cache, "work")
	if real, err := filepath.EvalSymlinks(work); err == nil {
		work = real
	}
	work += string(filepath.Separator)
	var path string
	for _, field := range strings.Split(string(out), "\x00") {
		switch {
		case strings.HasPrefix(field, "worktree "):
			path = strings.TrimPrefix(field, "worktree ")
		case field == "":
			path = ""
		case strings.HasPrefix(field, "branch ") && path != "":
			if !strings.HasPrefix(path, work) {
				continue
			}
			if _, err := os.Stat(path); err == nil {
				continue
			}
			_ = c.withTreeLock(ctx, func() error {
				_, err := workspace.Git(ctx, c.dir, "worktree", "remove", "--force", "--force", path)
				if err == nil {
					_, err = workspace.Git(ctx, c.dir, "update-ref", "-d", strings.TrimPrefix(field, "branch "))
				}
				return err
			})
		}
	}
}
