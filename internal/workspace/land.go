package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/aot-loop/aot/internal/brief"
)

// Landing says where the loop's work is after [Manager.Land].
type Landing struct {
	Landed  bool   // the branch the run started from now holds the work
	Branch  string // where the work is: that branch, or the integration branch
	Commits int    // commits the loop added since the run started
	Message string // one sentence for the person, with the command to take the work when it was not landed
}

// Land ends the run. When the branch the run started from has not moved
// since (or only forward, to a commit of the integration branch), it is
// fast-forwarded to the integration branch: with git merge --ff-only in the
// person's working tree when it is checked out there and clean (git status
// shows nothing but the engine's files), by moving the ref alone when it is
// checked out nowhere. The integration worktree and branch are then removed.
// Otherwise the work stays on the integration branch and the message says how
// to take it. Call it when no attempt is running; the manager is not used
// afterwards, except to Start a new run.
func (m *Manager) Land(ctx context.Context) (Landing, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, done, err := m.tally(ctx, "Land")
	if done {
		return l, err
	}
	head, start, n := m.head, m.start, l.Commits
	// Two loops of one repository may land at once: one landing at a
	// time, each looking at the person's branch and tree afresh, or both
	// would fast-forward the same checkout from the same commit. The lock
	// is in aot's folder for the repository (the default one, whatever
	// --worktree-dir says), never in the person's repository.
	lockDir := DefaultDir(m.common)
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return Landing{}, fmt.Errorf("workspace: land: %w", err)
	}
	lock := flock.New(filepath.Join(lockDir, "land.lock"))
	if ok, err := lock.TryLockContext(ctx, 50*time.Millisecond); !ok {
		return Landing{}, fmt.Errorf("workspace: land: wait for another loop's landing: %v", err)
	}
	defer lock.Unlock()
	short := strings.TrimPrefix(start.Branch, "refs/heads/")
	keep := func(why, how string) (Landing, error) {
		l.Message = fmt.Sprintf("%s left on branch %s: %s; to take it, %s", brief.Count(n, "commit"), m.intBranch, why, how)
		return l, m.leaveBranch(ctx)
	}
	merge := "run `git merge " + m.intBranch + "` on " + short
	if start.Branch == "" {
		return keep("HEAD was detached when the run started", "run `git merge "+m.intBranch+"` on the branch you want it on")
	}
	cur, _ := m.line(ctx, m.root, "rev-parse", "--verify", "-q", start.Branch+"^{commit}")
	if cur == "" {
		return keep(short+" no longer exists", "run `git branch "+short+" "+m.intBranch+"`")
	}
	if _, err := m.git(ctx, m.root, "merge-base", "--is-ancestor", cur, head); err != nil {
		if exitCode(err) != 1 {
			return Landing{}, fmt.Errorf("workspace: land: %w", err)
		}
		return keep(short+" has commits the loop's work is not based on", merge)
	}
	if cur != head {
		wts, err := m.worktrees(ctx, m.root)
		if err != nil {
			return Landing{}, fmt.Errorf("workspace: land: %w", err)
		}
		checkedOut := ""
		for _, w := range wts {
			if "refs/heads/"+w.branch == start.Branch {
				checkedOut = w.path
			}
		}
		switch checkedOut {
		case "":
			if _, err := m.git(ctx, m.root, "update-ref", "-m", "aot: land loop "+m.loop, start.Branch, head, cur); err != nil {
				return keep(short+" could not be moved ("+err.Error()+")", merge)
			}
		case m.root:
			dirty, err := m.dirty(ctx)
			if err != nil {
				return Landing{}, fmt.Errorf("workspace: land: %w", err)
			}
			if dirty {
				return keep("your working tree has uncommitted changes, left as they were",
					"commit or stash them, then "+merge)
			}
			inWay, err := m.inTheWay(ctx, cur, head)
			if err != nil {
				return Landing{}, fmt.Errorf("workspace: land: %w", err)
			}
			if inWay != "" {
				return keep("your untracked or ignored file "+inWay+" is where the loop's work puts a file, left as it was",
					"move it away, then "+merge)
			}
			killPoint("land")
			if _, err := m.git(ctx, m.root, "merge", "-q", "--ff-only", "--no-stat", head); err != nil {
				return keep("the fast-forward failed ("+err.Error()+")", merge)
			}
		default:
			return keep(short+" is checked out in "+checkedOut, merge+" there")
		}
	}
	l.Landed, l.Branch = true, short
	l.Message = fmt.Sprintf("%s fast-forwarded onto %s (%.12s..%.12s)", brief.Count(n, "commit"), short, cur, head)
	return l, m.finishRun(ctx)
}

// Leave ends a run that did not complete: its work, if any, stays on the
// integration branch (kept for a resumed run, which lands it when the loop
// completes), the integration worktree goes, and the message says how to
// take the work. The person's branches and working tree are not touched.
func (m *Manager) Leave(ctx context.Context, why string) (Landing, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, done, err := m.tally(ctx, "Leave")
	if done {
		return l, err
	}
	l.Message = fmt.Sprintf("%s left on branch %s, not landed: %s; to take them anyway, run `git merge %s`", brief.Count(l.Commits, "commit"), m.intBranch, why, m.intBranch)
	return l, m.leaveBranch(ctx)
}

// tally begins the end of a run (op is Land or Leave): how many commits it
// added to the integration branch. With none the run is finished at once
// and done is true, as it is on an error.
func (m *Manager) tally(ctx context.Context, op string) (l Landing, done bool, err error) {
	if !m.started {
		return Landing{}, true, errors.New("workspace: " + op + " before Start")
	}
	count, err := m.line(ctx, m.intPath, "rev-list", "--count", m.start.Head+".."+m.head)
	if err != nil {
		return Landing{}, true, fmt.Errorf("workspace: %s: %w", strings.ToLower(op), err)
	}
	n, _ := strconv.Atoi(count)
	l = Landing{Branch: m.intBranch, Commits: n}
	if n == 0 {
		l.Message = "the loop committed nothing"
		return l, true, m.finishRun(ctx)
	}
	return l, false, nil
}

// leaveBranch ends a run whose work stays on the integration branch: the
// branch and the start record stay (a resumed run lands from them), the
// integration worktree goes, so that the person may merge, rename or
// delete the branch.
func (m *Manager) leaveBranch(ctx context.Context) error {
	err := m.removeWorktree(ctx, m.root, m.intPath)
	m.started, m.history = false, nil
	if err != nil {
		return fmt.Errorf("workspace: land: %w", err)
	}
	return nil
}

// inTheWay returns a file the commits from..to add or change that the
// person's working tree has but git does not track (untracked or ignored):
// a fast-forward would overwrite it, ignored ones silently. "" when none.
func (m *Manager) inTheWay(ctx context.Context, from, to string) (string, error) {
	out, err := m.git(ctx, m.root, "diff-tree", "-r", "-z", "--no-renames", "--name-only", "--diff-filter=d", from, to)
	if err != nil {
		return "", err
	}
	files := splitZ(out)
	if len(files) == 0 {
		return "", nil
	}
	args := []string{"ls-files", "-z", "--"}
	for _, f := range files {
		args = append(args, ":(literal)"+f)
	}
	out, err = m.git(ctx, m.root, args...)
	if err != nil {
		return "", err
	}
	tracked := map[string]bool{}
	for _, f := range splitZ(out) {
		tracked[f] = true
	}
	for _, f := range files {
		if tracked[f] {
			continue
		}
		if _, err := os.Lstat(filepath.Join(m.root, filepath.FromSlash(f))); err == nil || !os.IsNotExist(err) {
			return f, nil
		}
	}
	return "", nil
}

// dirty reports whether the person's working tree has changes to tracked
// files other than the engine's. Untracked files (notes, build output) do
// not stop a fast-forward: git refuses it by itself when the loop's work
// would overwrite one, and the work then stays on its branch.
func (m *Manager) dirty(ctx context.Context) (bool, error) {
	args := []string{"status", "--porcelain", "-z", "--untracked-files=no", "--", "."}
	args = append(args, m.protect.excludes()...)
	if rel, err := filepath.Rel(m.root, filepath.Dir(m.loopDir)); err == nil && !strings.HasPrefix(rel, "..") && rel != "." {
		args = append(args, ":(exclude,literal)"+filepath.ToSlash(rel))
	}
	out, err := m.git(ctx, m.root, args...)
	if err != nil {
		return false, err
	}
	return len(out) > 0, nil
}

// finishRun removes the integration worktree, branch and start record.
func (m *Manager) finishRun(ctx context.Context) error {
	err := m.removeWorktree(ctx, m.root, m.intPath)
	if _, e := m.git(ctx, m.root, "update-ref", "-d", "refs/heads/"+m.intBranch); e != nil && err == nil {
		err = e
	}
	os.Remove(m.metaPath)
	os.Remove(m.loopDir) // only when empty: kept attempts stay
	os.Remove(filepath.Dir(m.loopDir))
	m.started, m.history = false, nil
	if err != nil {
		return fmt.Errorf("workspace: land: %w", err)
	}
	return nil
}
