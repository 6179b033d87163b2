package durable

import (
	"context"
	"strings"
	"testing"
)

// An attempt allowed to hold its commit keeps it in its worker's clone
// (nothing pushed); that worker's batch merges it from there and pushes
// the integration branch alone; a retried batch finds it merged by its
// trailers and merges nothing again; another worker, which does not hold
// it, says so for that atom alone.
func TestAHeldCommitIsMergedByItsWorkerWithoutEverBeingPushed(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	a.OwnQueue = "q@a"
	ctx := context.Background()
	in := attemptInput(repo, seed, "A", `echo a > a.txt && echo '{"success": true}'`)
	in.Hold = true
	r, err := a.Attempt(ctx, in)
	if err != nil || r.Commit == "" || r.HeldOn != "q@a" {
		t.Fatalf("the attempt: %+v, %v", r, err)
	}
	if got := allBranches(t, repo); got != "main" {
		t.Fatalf("the remote's branches after a held attempt: %v, want main alone", got)
	}
	batch := MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1", Head: seed,
		Atoms: []MergeAtom{{Branch: in.Branch, Atom: "A", Attempt: 1, Message: "A", Commit: r.Commit, Base: r.Base, Files: r.RepoFiles, Held: true}}}

	b := newActivities(t)
	b.OwnQueue = "q@b"
	res, err := b.MergeBatch(ctx, batch)
	if err != nil || res.Atoms[0].Error == "" || branchOf(t, repo, "main") != seed {
		t.Fatalf("another worker's merge of a commit it does not hold: %+v, %v (main %s)", res, err, branchOf(t, repo, "main"))
	}

	res, err = a.MergeBatch(ctx, batch)
	if err != nil || res.Atoms[0].Error != "" || res.Atoms[0].Conflict || branchOf(t, repo, "main") != res.Commit {
		t.Fatalf("the holder's merge: %+v, %v", res, err)
	}
	if got := gitT(t, repo, "show", "main:a.txt"); got != "a" {
		t.Errorf("main's a.txt: %q", got)
	}
	if got := allBranches(t, repo); got != "main" {
		t.Errorf("the remote's branches after the merge: %v, want main alone", got)
	}
	again, err := a.MergeBatch(ctx, batch)
	if err != nil || again.Atoms[0].Commit != res.Atoms[0].Commit || branchOf(t, repo, "main") != res.Commit {
		t.Fatalf("a retried batch: %+v, %v; want A found merged at %s", again, err, res.Atoms[0].Commit)
	}
	if n := mergedTimes(t, repo, "main", "A"); n != 1 {
		t.Errorf("A merged %d times", n)
	}
}

// A stopping worker pushes what it holds to the atoms' branches, where a
// batch on the shared queue (any worker) merges it; attempts that end
// after that push their own commits.
func TestAStoppingWorkerPushesWhatItHolds(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	a.OwnQueue = "q@a"
	ctx := context.Background()
	run := func(atom string) (AttemptInput, AttemptResult) {
		t.Helper()
		in := attemptInput(repo, seed, atom, `echo `+atom+` > `+atom+`.txt && echo '{"success": true}'`)
		in.Hold = true
		r, err := a.Attempt(ctx, in)
		if err != nil || r.Commit == "" {
			t.Fatalf("attempt %s: %+v, %v", atom, r, err)
		}
		return in, r
	}
	inA, rA := run("A")
	inB, rB := run("B")
	if rA.HeldOn != "q@a" || rB.HeldOn != "q@a" {
		t.Fatalf("held on %q and %q", rA.HeldOn, rB.HeldOn)
	}
	n, err := a.pushHeld(ctx)
	if err != nil || n != 2 {
		t.Fatalf("pushHeld: %d, %v", n, err)
	}
	if branchOf(t, repo, inA.Branch) != rA.Commit || branchOf(t, repo, inB.Branch) != rB.Commit {
		t.Fatal("the held commits are not on their branches")
	}
	inC, rC := run("C")
	if rC.HeldOn != "" || branchOf(t, repo, inC.Branch) != rC.Commit {
		t.Fatalf("an attempt after the stop: held on %q, branch at %q, want its commit %s pushed", rC.HeldOn, branchOf(t, repo, inC.Branch), rC.Commit)
	}
	other := newActivities(t)
	var atoms []MergeAtom
	for _, x := range []struct {
		in AttemptInput
		r  AttemptResult
	}{{inA, rA}, {inB, rB}, {inC, rC}} {
		atoms = append(atoms, MergeAtom{Branch: x.in.Branch, Atom: x.in.Task.Atom.ID, Attempt: 1, Message: "m", Commit: x.r.Commit, Base: x.r.Base, Files: x.r.RepoFiles})
	}
	res, err := other.MergeBatch(ctx, MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1", Atoms: atoms})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range res.Atoms {
		if m.Error != "" || m.Conflict {
			t.Errorf("%s: %+v", atoms[i].Atom, m)
		}
	}
	if got := gitT(t, repo, "ls-tree", "--name-only", "main"); got != "A.txt\nB.txt\nC.txt\nREADME.md" {
		t.Errorf("main holds:\n%s", got)
	}
}

// allBranches lists repo's branches, space-separated.
func allBranches(t *testing.T, repo string) string {
	t.Helper()
	return strings.ReplaceAll(gitT(t, repo, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/"), "\n", " ")
}
