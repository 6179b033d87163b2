package durable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/local"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/workspace"
)

// pushTries bounds the merges redone because another merge reached the
// integration branch first.
const pushTries = 5

// Merge merges the atom's branch into the integration branch on the
// remote as a local run merges an attempt (workspace: one commit on the
// branch's tip with the attempt's message and trailers; a file both
// changed since the attempt's base is a conflict, nothing pushed). The
// new tip and the deletion of the atom's branch are pushed together, or
// neither: when another worker's push got in first, the merge is redone
// on the new tip. A retried Merge whose push went through finds its
// commit by its trailers and merges nothing again.
func (a *Activities) Merge(ctx context.Context, in MergeInput) (MergeResult, error) {
	ctx, stop := a.heartbeat(ctx, "merge "+in.Branch)
	defer stop()
	if in.Base == "" || in.Branch == "" {
		return MergeResult{}, nonRetryable(errors.New("merge: no base or no branch"))
	}
	in = in.named()
	c, err := a.openClone(ctx, in.Repo)
	if err != nil {
		return MergeResult{}, err
	}
	for try := 1; ; try++ {
		tip := c.remoteBranch(ctx, in.Base)
		if tip == "" {
			return MergeResult{}, nonRetryable(fmt.Errorf("%s has no branch %s", in.Repo, in.Base))
		}
		work := c.remoteBranch(ctx, in.Branch)
		if work == "" {
			if done, err := c.mergedAs(ctx, in, tip); err != nil || done != "" {
				return MergeResult{Commit: done}, err
			}
			return MergeResult{}, nonRetryable(fmt.Errorf("%s has no branch %s", in.Repo, in.Branch))
		}
		res, pushed, err := a.mergeOnce(ctx, c, in, tip, work)
		if err != nil || res.Conflict || pushed {
			return res, err
		}
		// Refused: the base moved. A remote that cannot be fetched is the
		// infrastructure's failure; one that moved is merged again.
		if err := c.fetch(ctx); err != nil {
			return MergeResult{}, err
		}
		if c.remoteBranch(ctx, in.Base) == tip && c.remoteBranch(ctx, in.Branch) == work {
			return MergeResult{}, fmt.Errorf("push %s to %s was refused, and the branch has not moved", in.Base, in.Repo)
		}
		if try == pushTries {
			return MergeResult{}, fmt.Errorf("push %s: the branch moved under %d merges in a row", in.Base, pushTries)
		}
	}
}

// named fills in what a workflow of an earlier version left out of the
// input: the loop and the attempt, from the branch aot/<loop>/<atom>-<n>.
func (in MergeInput) named() MergeInput {
	rest, ok := strings.CutPrefix(in.Branch, "aot/")
	loop, name, _ := strings.Cut(rest, "/")
	if in.Loop == "" && ok {
		in.Loop = loop
	}
	if i := strings.LastIndexByte(name, '-'); in.Attempt == 0 && i > 0 {
		in.Attempt, _ = strconv.Atoi(name[i+1:])
	}
	return in
}

// mergeOnce merges work into tip in a repository of its own and pushes
// the result with the deletion of the atom's branch; pushed is false when
// the push was refused. A conflict deletes the branch alone: the atom is
// re-run on the new tip.
func (a *Activities) mergeOnce(ctx context.Context, c *clone, in MergeInput, tip, work string) (res MergeResult, pushed bool, err error) {
	base := c.resolve(ctx, work+"^")
	if base == "" {
		return MergeResult{}, false, nonRetryable(fmt.Errorf("branch %s has no base commit", in.Branch))
	}
	sc, err := a.newScratch(ctx, c, tip)
	if err != nil {
		return MergeResult{}, false, err
	}
	defer sc.remove()
	m, err := sc.manager(ctx, in.Loop, in.Project, in.StateFile)
	if err != nil {
		return MergeResult{}, false, err
	}
	wa := m.Plan(in.Atom, in.Attempt)
	if err := m.Take(ctx, wa, base, work); err != nil {
		return MergeResult{}, false, err
	}
	msg := in.Message
	if strings.TrimSpace(msg) == "" {
		msg = "aot: atom " + in.Atom
	}
	mr, err := m.Finish(ctx, wa, msg, nil)
	if err != nil {
		return MergeResult{}, false, err
	}
	drop := workspace.RemoteUpdate{Ref: "refs/heads/" + in.Branch, Expect: work}
	if mr.Conflict || mr.Commit == "" {
		// Nothing to merge: the branch has served. Its deletion may fail
		// (another try deleted it); the answer stands either way.
		_ = workspace.Push(ctx, sc.repo, in.Repo, drop)
		if mr.Conflict {
			return MergeResult{Conflict: true, Files: mr.ConflictFiles, Commit: tip}, false, nil
		}
		return MergeResult{Commit: tip}, true, nil
	}
	up := workspace.RemoteUpdate{Ref: "refs/heads/" + in.Base, Commit: mr.Commit, Expect: tip}
	if err := workspace.Push(ctx, sc.repo, in.Repo, up, drop); err != nil {
		if ctx.Err() != nil {
			return MergeResult{}, false, ctx.Err()
		}
		return MergeResult{}, false, nil
	}
	return MergeResult{Commit: mr.Commit, Files: mr.Changed}, true, nil
}

// mergeLookback is how many commits of the integration branch a retried
// merge searches for its own.
const mergeLookback = 500

// mergedAs finds the commit that merged in's attempt into the branch at
// tip, by the trailers workspace gives it; "" when there is none.
func (c *clone) mergedAs(ctx context.Context, in MergeInput, tip string) (string, error) {
	found, err := c.mergedCommits(ctx, tip)
	return found[mergeTrailers(in)], err
}

// mergedCommits maps the trailers of the last mergeLookback commits on
// tip's first-parent line to their commits.
func (c *clone) mergedCommits(ctx context.Context, tip string) (map[string]string, error) {
	out, err := workspace.Git(ctx, c.dir, "log", "-z", "--first-parent", "-n", strconv.Itoa(mergeLookback), "--format=%H%n%B", tip)
	if err != nil {
		return nil, err
	}
	found := map[string]string{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		id, body, _ := strings.Cut(strings.TrimPrefix(string(rec), "\n"), "\n")
		body = strings.TrimSpace(body) + "\n"
		// The trailers are the message's last paragraph.
		if i := strings.LastIndex(body, "\n\n"); id != "" && i >= 0 {
			if _, ok := found[body[i+2:]]; !ok {
				found[body[i+2:]] = id
			}
		}
	}
	return found, nil
}

// mergeTrailers are the trailers of the commit that merges in's attempt.
func mergeTrailers(in MergeInput) string {
	_, trailers, _ := strings.Cut(workspace.CommitMessage("x", in.Loop, in.Atom, in.Attempt), "\n\n")
	return trailers
}

// Verify runs the state's base case in a checkout of in.Commit, in the
// project's folder, as a local run verifies the merged work
// (local.CheckBaseCase): with in.Judge, the loop's agent in the judge
// role on this worker rules on the assertion and quality checks; without,
// they count as not passed.
func (a *Activities) Verify(ctx context.Context, in VerifyInput) (VerifyResult, error) {
	ctx, stop := a.heartbeat(ctx, "verify "+short(in.Commit))
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
	sc, err := a.newScratch(ctx, c, in.Commit)
	if err != nil {
		return VerifyResult{}, err
	}
	defer sc.remove()
	ctx = sc.noteTrees(ctx) // the judge's process trees, for a sweep (orphans.go)
	m, err := sc.manager(ctx, in.Loop, in.Project, in.StateFile)
	if err != nil {
		return VerifyResult{}, err
	}
	var judge agent.Agent
	var judgeLog logMark // the judges' log (engine's judge: attempt 1 of base_case)
	if in.Judge && a.NewAgent != nil {
		sf := ""
		if in.StateFile != "" {
			sf = filepath.Join(rootOf(m.IntegrationDir(), in.Project), filepath.FromSlash(in.StateFile))
		}
		dirs := a.dirsFor(in.Loop, sf)
		if judge, err = a.NewAgent(in.Agent, agent.Judge, dirs); err != nil {
			if refused := (*RefusedError)(nil); errors.As(err, &refused) {
				return VerifyResult{}, nonRetryable(fmt.Errorf("worker %s %w", a.identity(), err))
			}
			judge = nil // judged checks count as not passed; the report says they were not judged
		}
		judgeLog = markAttemptLog(dirs, "base_case", string(agent.Judge), 1)
	}
	out, err := local.CheckBaseCase(ctx, s, m.IntegrationDir(), judge, in.Timeout, in.CheckTimeout)
	if lg := judgeLog.since(a.identity()); judge != nil && lg != nil && err == nil {
		out.Logs = map[string]string{lg.Name: lg.Text}
	}
	if err != nil {
		if ctx.Err() != nil {
			return VerifyResult{}, ctx.Err()
		}
		return VerifyResult{}, nonRetryable(fmt.Errorf("the base case: %w", err))
	}
	return out, nil
}
