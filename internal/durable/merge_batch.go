package durable

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aot-loop/aot/internal/workspace"
)

// MergeBatch merges several atoms' branches into the integration branch on
// the remote, in the order given, each as Merge merges one: one commit on
// the tip with the attempt's message and trailers, and the same conflict
// rule (a file both the atom and the integration branch changed since the
// atom's base, or one git cannot merge, is a conflict). A conflict fails
// that atom alone; the others still merge. The new tip and the deletion of
// every branch the batch took are pushed together, each with its lease, or
// none of them; when another push got in first, the batch is merged again
// on the new tip. A retried MergeBatch whose push went through finds the
// atoms it merged by their trailers and merges nothing again. An atom
// whose commit this worker holds (MergeAtom.Held, held.go) is merged from
// its clone, and has no branch to delete.
//
// The merges are made with git's plumbing in the worker's clone, without
// a checkout: two git processes an atom (the merge's tree, the commit; a
// third for its files when the attempt's report does not name the commit
// its branch holds), where a worktree per atom would take a dozen. The
// remote is fetched first unless this worker pushed every branch itself
// (known.go).
func (a *Activities) MergeBatch(ctx context.Context, in MergeBatchInput) (MergeBatchResult, error) {
	ctx, stop := a.heartbeat(ctx, fmt.Sprintf("merge %d branches into %s", len(in.Atoms), in.Base))
	defer stop()
	if in.Base == "" || len(in.Atoms) == 0 || slices.ContainsFunc(in.Atoms, func(m MergeAtom) bool { return m.Branch == "" }) {
		return MergeBatchResult{}, nonRetryable(errors.New("merge: no base, no branches, or a branch without a name"))
	}
	// Branches this worker pushed itself are merged as it pushed them,
	// without a fetch; the push's leases say whether any has moved since.
	// Held commits (held.go) are in this clone, on no branch; the
	// workflow's head says whether the base this worker last pushed is
	// still the base.
	names := []string{in.Base}
	for _, m := range in.Atoms {
		if !m.Held {
			names = append(names, m.Branch)
		}
	}
	c, fetched, err := a.cloneOf(ctx, in.Repo, false)
	if err != nil {
		return MergeBatchResult{}, err
	}
	branches := c.pushedAll(names)
	if branches != nil && in.Head != "" && branches[in.Base] != in.Head {
		branches = nil
	}
	if branches == nil {
		if !fetched {
			if err := c.fetch(ctx); err != nil {
				return MergeBatchResult{}, err
			}
		}
		if branches, err = c.fetchedBranches(ctx); err != nil {
			return MergeBatchResult{}, err
		}
	}
	for try := 1; ; try++ {
		tip := branches[in.Base]
		if tip == "" {
			return MergeBatchResult{}, nonRetryable(fmt.Errorf("%s has no branch %s", in.Repo, in.Base))
		}
		works := make([]string, len(in.Atoms))
		var held []string
		for i, m := range in.Atoms {
			switch {
			case !m.Held:
				works[i] = branches[m.Branch]
			case a.holding.held(in.Repo, m.Branch) == m.Commit && m.Commit != "":
				works[i] = m.Commit
				held = append(held, m.Branch)
			}
		}
		res, pushed, err := c.mergeBatch(ctx, in, tip, works)
		if pushed {
			a.holding.merged(in.Repo, held)
		}
		if err != nil || pushed {
			return res, err
		}
		// Refused: a branch moved. A remote that cannot be fetched is the
		// infrastructure's failure; one that moved is merged again.
		if err := c.fetch(ctx); err != nil {
			return MergeBatchResult{}, err
		}
		now, err := c.fetchedBranches(ctx)
		if err != nil {
			return MergeBatchResult{}, err
		}
		moved := now[in.Base] != tip
		for i, m := range in.Atoms {
			moved = moved || !m.Held && now[m.Branch] != works[i]
		}
		if !moved {
			return MergeBatchResult{}, fmt.Errorf("push %s to %s was refused, and no branch has moved", in.Base, in.Repo)
		}
		if try == pushTries {
			return MergeBatchResult{}, fmt.Errorf("push %s: the branches moved under %d merges in a row", in.Base, pushTries)
		}
		branches = now
	}
}

// fetchedBranches are the remote's branches as the clone last fetched
// them, with their commits, read by one git process.
func (c *clone) fetchedBranches(ctx context.Context) (map[string]string, error) {
	out, err := workspace.Git(ctx, c.dir, "for-each-ref", "--format=%(objectname) %(refname)", "refs/remotes/origin/")
	if err != nil {
		return nil, err
	}
	branches := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		commit, ref, _ := strings.Cut(line, " ")
		if name, ok := strings.CutPrefix(ref, "refs/remotes/origin/"); ok {
			branches[name] = commit
		}
	}
	return branches, nil
}

// mergeBatch merges the atoms' branches (at works; "" for a branch
// the remote no longer has) into tip, and pushes the result with the
// deletion of the branches; pushed is false when the push was refused.
func (c *clone) mergeBatch(ctx context.Context, in MergeBatchInput, tip string, works []string) (res MergeBatchResult, pushed bool, err error) {
	res = MergeBatchResult{Commit: tip, Atoms: make([]MergeResult, len(in.Atoms))}
	// The merges write their trees and commits into the worker's clone
	// itself (objects only: no ref, index or checkout changes), so that
	// the next attempts on this worker find the new head there.
	b := &batch{dir: c.dir, tip: tip, head: tip, project: strings.Trim(in.Project, "/"), since: map[string][]string{}}
	var found map[string]string // trailers -> commit, read once when a branch is gone
	var drops []workspace.RemoteUpdate
	for i, m := range in.Atoms {
		one := MergeInput{Repo: in.Repo, Base: in.Base, Branch: m.Branch, Atom: m.Atom, Loop: in.Loop, Attempt: m.Attempt}.named()
		if works[i] == "" {
			// Gone: merged by an earlier try whose push went through, or
			// not there to merge.
			if found == nil {
				if found, err = c.mergedCommits(ctx, tip); err != nil {
					return MergeBatchResult{}, false, err
				}
			}
			switch done := found[mergeTrailers(one)]; {
			case done != "":
				res.Atoms[i] = MergeResult{Commit: done}
			case m.Held:
				res.Atoms[i] = MergeResult{Error: fmt.Sprintf("this worker no longer holds the commit of %s (it was made again?)", m.Branch)}
			default:
				res.Atoms[i] = MergeResult{Error: fmt.Sprintf("%s has no branch %s", in.Repo, m.Branch)}
			}
			continue
		}
		r, err := b.merge(ctx, one, m, works[i])
		if err != nil {
			return MergeBatchResult{}, false, err
		}
		res.Atoms[i] = r
		if !m.Held {
			drops = append(drops, workspace.RemoteUpdate{Ref: "refs/heads/" + m.Branch, Expect: works[i]})
		}
	}
	res.Commit = b.head
	updates := drops
	if b.head != tip {
		updates = append([]workspace.RemoteUpdate{{Ref: "refs/heads/" + in.Base, Commit: b.head, Expect: tip}}, drops...)
	}
	if err := workspace.Push(ctx, c.dir, in.Repo, updates...); err != nil {
		if ctx.Err() != nil {
			return MergeBatchResult{}, false, ctx.Err()
		}
		return MergeBatchResult{}, false, nil
	}
	c.wrote(b.head)
	now := map[string]string{}
	for _, u := range updates {
		now[strings.TrimPrefix(u.Ref, "refs/heads/")] = u.Commit
	}
	c.pushedTo(now)
	return res, true, nil
}

// batch is the integration branch as a batch of merges moves it, in a
// repository without a checkout.
type batch struct {
	dir       string
	tip, head string // where the batch started; where it is now
	project   string // the project's folder in the repository, "" at the top
	merged    []batchMerge
	since     map[string][]string // files the branch changed from a base to tip
}

type batchMerge struct {
	head    string
	changed []string
}

// merge makes the commit that merges work (one commit on its base, the
// attempt's) onto the batch's head, or tells the conflict.
func (b *batch) merge(ctx context.Context, in MergeInput, atom MergeAtom, work string) (MergeResult, error) {
	message := atom.Message
	base, changed := atom.Base, atom.Files
	if atom.Commit != work || base == "" || len(changed) == 0 {
		// Not the attempt's commit as it reported it (or a workflow of an
		// earlier version): git says.
		out, err := workspace.Git(ctx, b.dir, "show", "-z", "--no-renames", "--name-only", "--diff-merges=first-parent", "--format=%P", work)
		if err != nil {
			return MergeResult{}, err
		}
		fields := strings.Split(string(out), "\x00")
		parents := strings.Fields(fields[0])
		if len(parents) == 0 {
			return MergeResult{Error: fmt.Sprintf("branch %s has no base commit", in.Branch)}, nil
		}
		base, changed = parents[0], nil
		for _, f := range fields[1:] {
			if f = strings.TrimPrefix(f, "\n"); f != "" {
				changed = append(changed, f)
			}
		}
	}
	if len(changed) == 0 {
		return MergeResult{Commit: b.head}, nil // nothing to merge: the branch has served
	}
	tree := work + "^{tree}"
	if base != b.head {
		since, err := b.changedSince(ctx, base)
		if err != nil {
			return MergeResult{}, err
		}
		if both := bothChanged(changed, since); len(both) > 0 {
			return MergeResult{Conflict: true, Files: b.projectPaths(both), Commit: b.head}, nil
		}
		out, err := workspace.Git(ctx, b.dir, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", b.head, work)
		parts := strings.Split(string(out), "\x00")
		var ge *workspace.GitError
		switch {
		case errors.As(err, &ge) && ge.Code == 1:
			var files []string
			for _, p := range parts[1:] {
				if p == "" {
					break
				}
				files = append(files, p)
			}
			return MergeResult{Conflict: true, Files: b.projectPaths(files), Commit: b.head}, nil
		case err != nil:
			return MergeResult{}, err
		}
		tree = strings.TrimSpace(parts[0])
	}
	msg := workspace.CommitMessage(message, in.Loop, in.Atom, in.Attempt)
	out, err := workspace.Git(ctx, b.dir, "commit-tree", tree, "-p", b.head, "-m", msg)
	if err != nil {
		return MergeResult{}, err
	}
	b.head = strings.TrimSpace(string(out))
	b.merged = append(b.merged, batchMerge{head: b.head, changed: changed})
	return MergeResult{Commit: b.head, Files: b.projectPaths(changed)}, nil
}

// changedSince lists the files the integration branch changed since base:
// from git up to the batch's start (unless base is where it started), then
// the batch's own merges after base.
func (b *batch) changedSince(ctx context.Context, base string) ([]string, error) {
	for i, m := range b.merged {
		if m.head == base {
			return b.mergedFiles(i + 1), nil
		}
	}
	files, ok := b.since[base]
	if !ok && base != b.tip {
		out, err := workspace.Git(ctx, b.dir, "diff-tree", "-r", "-z", "--no-renames", "--name-only", base, b.tip)
		if err != nil {
			return nil, err
		}
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
		b.since[base] = files
	}
	return append(slices.Clone(files), b.mergedFiles(0)...), nil
}

// mergedFiles are the files the batch's merges from the from-th on changed.
func (b *batch) mergedFiles(from int) []string {
	var out []string
	for _, m := range b.merged[from:] {
		out = append(out, m.changed...)
	}
	return out
}

// projectPaths makes repository-relative paths relative to the project's
// folder, as workspace reports them.
func (b *batch) projectPaths(files []string) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		if b.project != "" {
			if rest, ok := strings.CutPrefix(f, b.project+"/"); ok {
				f = rest
			} else {
				f = strings.Repeat("../", strings.Count(b.project, "/")+1) + f
			}
		}
		out = append(out, f)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// bothChanged returns the files of a that are in b.
func bothChanged(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, x := range b {
		in[x] = true
	}
	return slices.DeleteFunc(slices.Clone(a), func(x string) bool { return !in[x] })
}
