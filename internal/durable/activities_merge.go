package durable

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/workspace"
)

// pushTries bounds the merges redone because another merge reached the
// integration branch first.
const pushTries = 5

// Merge merges the atom's branch into the integration branch with a merge
// commit (git merge --no-ff) in a worktree at the branch's tip, and pushes
// it. A conflict aborts the merge and is reported, nothing pushed. When
// another worker's push got in first, the merge is redone on the new tip.
// A branch the integration branch already holds (a retried Merge whose
// push went through) merges nothing again: its tip is the result.
func (a *Activities) Merge(ctx context.Context, in MergeInput) (MergeResult, error) {
	stop := a.heartbeat(ctx, "merge "+in.Branch)
	defer stop()
	if in.Base == "" || in.Branch == "" {
		return MergeResult{}, nonRetryable(errors.New("merge: no base or no branch"))
	}
	c, err := a.openClone(ctx, in.Repo)
	if err != nil {
		return MergeResult{}, err
	}
	for try := 1; ; try++ {
		tip := c.resolve(ctx, "refs/remotes/origin/"+in.Base)
		if tip == "" {
			return MergeResult{}, nonRetryable(fmt.Errorf("%s has no branch %s", in.Repo, in.Base))
		}
		branch := c.resolve(ctx, "refs/remotes/origin/"+in.Branch)
		if branch == "" {
			return MergeResult{}, nonRetryable(fmt.Errorf("%s has no branch %s", in.Repo, in.Branch))
		}
		if _, err := workspace.Git(ctx, c.dir, "merge-base", "--is-ancestor", branch, tip); err == nil {
			return MergeResult{Commit: tip}, nil
		}
		res, pushed, err := a.mergeOnce(ctx, c, in, tip, branch)
		if err != nil || res.Conflict || pushed {
			return res, err
		}
		// Rejected: the base moved. A remote that cannot be fetched is the
		// infrastructure's failure; one that moved is merged again.
		if err := c.fetch(ctx); err != nil {
			return MergeResult{}, err
		}
		if c.resolve(ctx, "refs/remotes/origin/"+in.Base) == tip {
			return MergeResult{}, fmt.Errorf("push %s to %s was refused, and the branch has not moved", in.Base, in.Repo)
		}
		if try == pushTries {
			return MergeResult{}, fmt.Errorf("push %s: the branch moved under %d merges in a row", in.Base, pushTries)
		}
	}
}

// mergeOnce merges branch into tip in a fresh worktree and pushes the
// result; pushed is false when the push was refused.
func (a *Activities) mergeOnce(ctx context.Context, c *clone, in MergeInput, tip, branch string) (res MergeResult, pushed bool, err error) {
	wt, err := a.addWorktree(ctx, c, tip)
	if err != nil {
		return MergeResult{}, false, err
	}
	defer wt.remove()
	msg := fmt.Sprintf("aot: merge atom %s\n\nAot-Atom: %s\nAot-Branch: %s\n", in.Atom, in.Atom, in.Branch)
	if _, err := workspace.Git(ctx, wt.dir, "merge", "--quiet", "--no-ff", "--no-edit", "--no-verify", "-m", msg, branch); err != nil {
		out, derr := workspace.Git(ctx, wt.dir, "diff", "--name-only", "-z", "--diff-filter=U")
		conflicts := nulSplit(out)
		if derr != nil || len(conflicts) == 0 {
			return MergeResult{}, false, fmt.Errorf("merge %s into %s: %w", in.Branch, in.Base, err)
		}
		workspace.Git(ctx, wt.dir, "merge", "--abort")
		return MergeResult{Conflict: true, Files: conflicts, Commit: tip}, false, nil
	}
	commit, err := gitLine(ctx, wt.dir, "rev-parse", "HEAD")
	if err != nil {
		return MergeResult{}, false, err
	}
	files, err := changedFiles(ctx, wt.dir, tip, commit)
	if err != nil {
		return MergeResult{}, false, err
	}
	if _, err := workspace.Git(ctx, wt.dir, "push", "--quiet", "--no-verify", in.Repo, commit+":refs/heads/"+in.Base); err != nil {
		if ctx.Err() != nil {
			return MergeResult{}, false, ctx.Err()
		}
		return MergeResult{}, false, nil
	}
	return MergeResult{Commit: commit, Files: files}, true, nil
}

// Verify runs the state's base case in a worktree at in.Commit, in the
// project's folder, as a local run verifies it (engine.CheckBaseCase):
// with in.Judge, the loop's agent in the judge role on this worker rules
// on the assertion and quality checks; without, they count as not passed.
func (a *Activities) Verify(ctx context.Context, in VerifyInput) (VerifyResult, error) {
	stop := a.heartbeat(ctx, "verify "+short(in.Commit))
	defer stop()
	s, err := state.Parse(in.State)
	if err != nil {
		return VerifyResult{}, nonRetryable(fmt.Errorf("the loop's state: %w", err))
	}
	c, err := a.openClone(ctx, in.Repo)
	if err != nil {
		return VerifyResult{}, err
	}
	if c.resolve(ctx, in.Commit) == "" {
		return VerifyResult{}, nonRetryable(fmt.Errorf("%s has no commit %s", in.Repo, in.Commit))
	}
	wt, err := a.addWorktree(ctx, c, in.Commit)
	if err != nil {
		return VerifyResult{}, err
	}
	defer wt.remove()
	dir := wt.dir
	if p := strings.Trim(in.Project, "/"); p != "" {
		dir = filepath.Join(wt.dir, filepath.FromSlash(p))
	}
	var judge agent.Agent
	if in.Judge && a.NewAgent != nil {
		sf := ""
		if in.StateFile != "" {
			sf = filepath.Join(wt.dir, filepath.FromSlash(in.StateFile))
		}
		if judge, err = a.NewAgent(in.Agent, agent.Judge, a.dirsFor(in.Loop, sf)); err != nil {
			judge = nil // judged checks count as not passed; the report says they were not judged
		}
	}
	out, err := engine.CheckBaseCase(ctx, s, dir, judge, in.Timeout, 0)
	if err != nil {
		if ctx.Err() != nil {
			return VerifyResult{}, ctx.Err()
		}
		return VerifyResult{}, nonRetryable(fmt.Errorf("the base case: %w", err))
	}
	return out, nil
}
