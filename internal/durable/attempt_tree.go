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
		if c.made(commit) {
			return c, nil // made implies the clone's .git folder
		}
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
	c    *clone
	sc   *scratch
	m    *workspace.Manager
	a    workspace.Attempt
	slot string // the worktree's folder in the clone's pool (trees/)
}

// The worktrees of a clone's attempts are kept between attempts, in
// trees/<clone>/t-*: an attempt takes a free one (its t-*.free file, which
// only one taker can delete) and checks its own branch out there, touching
// only the files that differ, instead of adding a worktree (every file
// checked out) and removing it after. An attempt that ends releases its
// worktree (its branch deleted) and marks it free again. The
// slot an attempt holds is noted in its work/wt-* folder: when its worker
// dies, the sweep removes that slot whole.

const slotNote = "slot"

// poolOf is the folder of c's reusable worktrees.
func (a *Activities) poolOf(c *clone) string {
	return filepath.Join(a.Cache, "trees", filepath.Base(c.dir))
}

// takeSlot takes a free worktree of c's pool, or names a new one (reused
// false), and notes it in the attempt's folder sc.
func (a *Activities) takeSlot(c *clone, sc *scratch) (slot string, reused bool, err error) {
	pool := a.poolOf(c)
	entries, _ := os.ReadDir(pool)
	for _, e := range entries {
		name, free := strings.CutSuffix(e.Name(), ".free")
		if free && os.Remove(filepath.Join(pool, e.Name())) == nil {
			slot, reused = filepath.Join(pool, name), true
			break
		}
	}
	if slot == "" {
		if err := os.MkdirAll(pool, 0o755); err != nil {
			return "", false, fmt.Errorf("cache folder: %w", err)
		}
		if slot, err = os.MkdirTemp(pool, "t-"); err != nil {
			return "", false, fmt.Errorf("cache folder: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(sc.dir, slotNote), []byte(slot), 0o644); err != nil {
		os.WriteFile(slot+".free", nil, 0o644)
		return "", false, fmt.Errorf("cache folder: %w", err)
	}
	return slot, reused, nil
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
	t := &attemptTree{c: c, sc: sc}
	in := c.dir
	if p := strings.Trim(project, "/"); p != "" && !filepath.IsAbs(project) {
		in = filepath.Join(c.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(in, 0o755); err != nil {
			t.remove(ctx)
			return nil, fmt.Errorf("cache folder: %w", err)
		}
	}
	if t.m, err = a.managerOf(ctx, in, loop, stateFile, c.dir); err != nil {
		t.remove(ctx)
		return nil, err
	}
	t.m = t.m.Detached(head)
	slot, reused, err := a.takeSlot(c, sc)
	if err != nil {
		t.remove(ctx)
		return nil, err
	}
	// Plan's names, in the slot: the project's folder the same way down.
	wa := t.m.Plan(atom, n)
	rel, err := filepath.Rel(wa.Path, wa.Dir)
	if err != nil {
		t.remove(ctx)
		return nil, err
	}
	wa.Branch += "-" + filepath.Base(sc.dir)
	wa.Path = filepath.Join(slot, "wt")
	wa.Dir = filepath.Join(wa.Path, rel)
	t.a, t.slot = wa, slot
	if reused {
		if err = t.m.Reuse(ctx, wa); err != nil {
			// Not reusable (a git process of the last attempt was cut
			// short): a new worktree in its place.
			err = c.withTreeLock(ctx, func() error {
				c.removeTree(ctx, wa.Path)
				return t.m.CreateAt(ctx, wa)
			})
		}
	} else {
		err = c.withTreeLock(ctx, func() error { return t.m.CreateAt(ctx, wa) })
	}
	if err != nil {
		c.forget()
		t.remove(ctx)
		return nil, err
	}
	return t, nil
}

// managers are the workspace managers a worker opened, one per project
// folder, loop and state file: an attempt takes a copy (Detached).
var managers sync.Map // managerKey -> *workspace.Manager

type managerKey struct{ dir, loop, stateFile string }

// managerOf is the manager of loop in the project folder in of the clone
// at root, opened on first use.
func (a *Activities) managerOf(ctx context.Context, in, loop, stateFile, root string) (*workspace.Manager, error) {
	k := managerKey{in, loop, stateFile}
	if m, ok := managers.Load(k); ok {
		return m.(*workspace.Manager), nil
	}
	// The attempts' worktrees are in the pool, never in o.Dir.
	o := workspace.Options{LoopID: loop, Dir: filepath.Join(a.Cache, "trees")}
	if stateFile != "" && !filepath.IsAbs(stateFile) {
		o.StateFile = filepath.Join(root, filepath.FromSlash(stateFile))
	}
	m, err := workspace.Open(ctx, in, o)
	if err != nil {
		return nil, err
	}
	managers.Store(k, m)
	return m, nil
}

// removeTree removes the worktree at p from c, whatever is left of it.
func (c *clone) removeTree(ctx context.Context, p string) {
	if _, err := workspace.Git(ctx, c.dir, "worktree", "remove", "--force", "--force", p); err != nil {
		os.RemoveAll(p)
		workspace.Git(ctx, c.dir, "worktree", "remove", "--force", "--force", p)
	}
}

// remove releases the worktree for the next attempt (or, when that fails,
// removes it with its branch) and deletes the attempt's folder; it goes on
// after ctx has ended.
func (t *attemptTree) remove(ctx context.Context) {
	if t.slot != "" {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		if t.m.Release(ctx, t.a) == nil {
			os.WriteFile(t.slot+".free", nil, 0o644)
		} else {
			_ = t.c.withTreeLock(ctx, func() error {
				c := t.c
				c.removeTree(ctx, t.a.Path)
				workspace.Git(ctx, c.dir, "update-ref", "-d", "refs/heads/"+t.a.Branch)
				return os.RemoveAll(t.slot)
			})
		}
		cancel()
	}
	t.sc.remove()
}
