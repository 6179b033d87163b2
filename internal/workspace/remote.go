package workspace

import (
	"context"
	"fmt"
	"strings"
)

// The git work of a loop whose attempts run on other machines (the
// Temporal workers): they meet through a git remote. Each worker commits
// and merges with a Manager of its own, as a local run does; what crosses
// machines is a commit on a branch of the remote.

// Take makes a's worktree and branch hold commit: the work an attempt did
// elsewhere on base, fetched into this repository. [Manager.Finish] then
// merges it into the integration branch exactly as it merges an attempt
// that [Manager.Create] made on base here: the same commit (never the
// engine's files), the same conflict rule, the same trailers.
func (m *Manager) Take(ctx context.Context, a Attempt, base, commit string) error {
	if err := m.Create(ctx, a); err != nil {
		return err
	}
	if _, err := m.git(ctx, a.Path, "reset", "-q", "--hard", commit); err != nil {
		return fmt.Errorf("workspace: take %s: %w", a.Branch, err)
	}
	m.protect.removeFrom(a.Path)
	m.setBase(a.Branch, base)
	return nil
}

// RemoteUpdate is one ref a push changes on a remote: Ref (a full ref
// name) to Commit, or deleted when Commit is "". The update holds only if
// the ref is at Expect on the remote now, or, with Expect "", does not
// exist: a branch that moved, or that another loop made meanwhile, is
// never overwritten.
type RemoteUpdate struct {
	Ref, Commit, Expect string
}

// Push makes the updates on the remote url from the repository at dir, all
// of them or none (git push --atomic, each with its lease). A push refused
// because a ref was not where its update expected it is an error like any
// other: fetch and look again to tell.
func Push(ctx context.Context, dir, url string, updates ...RemoteUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	args := []string{"push", "--quiet", "--no-verify"}
	if len(updates) > 1 {
		args = append(args, "--atomic")
	}
	var specs []string
	for _, u := range updates {
		if !strings.HasPrefix(u.Ref, "refs/") {
			return fmt.Errorf("workspace: push: %q is not a full ref name", u.Ref)
		}
		args = append(args, "--force-with-lease="+u.Ref+":"+u.Expect)
		specs = append(specs, u.Commit+":"+u.Ref)
	}
	args = append(append(args, url), specs...)
	if _, err := Git(ctx, dir, args...); err != nil {
		return fmt.Errorf("workspace: push to %s: %w", url, err)
	}
	return nil
}

// RemoteBranches lists the branches of the remote url whose names start
// with prefix (without refs/heads/), with their commits.
func RemoteBranches(ctx context.Context, dir, url, prefix string) (map[string]string, error) {
	out, err := Git(ctx, dir, "ls-remote", "--heads", url, "refs/heads/"+prefix+"*")
	if err != nil {
		return nil, fmt.Errorf("workspace: list the branches of %s: %w", url, err)
	}
	branches := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		commit, ref, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			continue
		}
		if name := strings.TrimPrefix(ref, "refs/heads/"); strings.HasPrefix(name, prefix) {
			branches[name] = commit
		}
	}
	return branches, nil
}
