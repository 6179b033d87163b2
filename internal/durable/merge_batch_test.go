package durable

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMergeBatchMergesEachAtomOnceAndAConflictFailsOnlyItsAtom(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{"shared.txt": "one\n"})
	a := newActivities(t)
	// The integration branch moves past the atoms' base first.
	before := pushed(t, a, repo, seed, "P", `echo p > p.txt`)
	if _, err := a.Merge(context.Background(), MergeInput{Repo: repo, Base: "main", Branch: before, Atom: "P"}); err != nil {
		t.Fatal(err)
	}
	tip := branchOf(t, repo, "main")
	var atoms []MergeAtom
	for _, at := range []struct{ id, script string }{
		{"A", `echo a > a.txt`},
		{"C", `echo c > shared.txt`},
		{"D", `echo d > shared.txt`}, // C changed it first: a conflict
		{"E", `mkdir -p sub && echo e > sub/e.txt`},
	} {
		atoms = append(atoms, MergeAtom{Branch: pushed(t, a, repo, seed, at.id, at.script), Atom: at.id, Attempt: 1, Message: "did " + at.id})
	}
	in := MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1", Atoms: atoms}
	res, err := a.MergeBatch(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Atoms) != 4 {
		t.Fatalf("results: %+v", res)
	}
	rA, rC, rD, rE := res.Atoms[0], res.Atoms[1], res.Atoms[2], res.Atoms[3]
	if rA.Conflict || rC.Conflict || rE.Conflict || rA.Error+rC.Error+rE.Error != "" {
		t.Fatalf("A, C, E: %+v %+v %+v", rA, rC, rE)
	}
	if !rD.Conflict || rD.Error != "" || !cmp.Equal(rD.Files, []string{"shared.txt"}) {
		t.Errorf("D changes shared.txt as C did: want a conflict on it, got %+v", rD)
	}
	if diff := cmp.Diff([][]string{{"a.txt"}, {"shared.txt"}, {"sub/e.txt"}}, [][]string{rA.Files, rC.Files, rE.Files}); diff != "" {
		t.Errorf("merged files (-want +got):\n%s", diff)
	}
	// One commit per merged atom, each on the one before, pushed as the
	// new tip; every branch the batch took is gone.
	if got := branchOf(t, repo, "main"); got != res.Commit || res.Commit != rE.Commit {
		t.Errorf("main at %s, the batch says %s, E merged as %s", got, res.Commit, rE.Commit)
	}
	for _, p := range [][2]string{{rA.Commit, tip}, {rC.Commit, rA.Commit}, {rE.Commit, rC.Commit}} {
		if got := gitT(t, repo, "rev-parse", p[0]+"^"); got != p[1] {
			t.Errorf("the parent of %s is %s, want %s", p[0], got, p[1])
		}
	}
	if got := gitT(t, repo, "log", "-1", "--format=%B", rC.Commit); !strings.HasPrefix(got, "did C\n") || !strings.Contains(got, "Aot-Atom: C\nAot-Attempt: 1") {
		t.Errorf("C's commit message:\n%s", got)
	}
	if got := gitT(t, repo, "show", "main:shared.txt"); got != "c" {
		t.Errorf("main:shared.txt = %q, want C's", got)
	}
	for _, m := range atoms {
		if got := branchOf(t, repo, m.Branch); got != "" {
			t.Errorf("branch %s is still on the remote", m.Branch)
		}
	}
	// Retried after its push went through, the batch merges nothing again:
	// it finds each merged atom's commit, and D's branch is gone.
	again, err := a.MergeBatch(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if again.Commit != res.Commit || again.Atoms[0].Commit != rA.Commit || again.Atoms[1].Commit != rC.Commit || again.Atoms[3].Commit != rE.Commit ||
		!strings.Contains(again.Atoms[2].Error, "no branch") {
		t.Errorf("the batch again: %+v", again)
	}
	log := gitT(t, repo, "log", "--format=%B", "main")
	for id, want := range map[string]int{"P": 1, "A": 1, "C": 1, "D": 0, "E": 1} {
		if n := strings.Count(log, "Aot-Atom: "+id+"\n"); n != want {
			t.Errorf("atom %s merged %d times, want %d", id, n, want)
		}
	}
	// An atom based on the tip itself.
	f := pushed(t, a, repo, res.Commit, "F", `echo f > f.txt`)
	last, err := a.MergeBatch(context.Background(), MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1", Atoms: []MergeAtom{{Branch: f, Atom: "F", Attempt: 1}}})
	if err != nil || last.Atoms[0].Commit != last.Commit || gitT(t, repo, "rev-parse", last.Commit+"^") != res.Commit || gitT(t, repo, "show", "main:f.txt") != "f" {
		t.Errorf("F on the tip: %+v, %v", last, err)
	}
	noWorktrees(t, a)
}

// Two workers merging batches at once (as a retried batch beside a live
// one would): the push that loses the race is merged again on the
// winner's commit, and every atom lands once.
func TestConcurrentMergeBatchesBothLand(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	w1, w2 := newActivities(t), newActivities(t)
	var batches [2][]MergeAtom
	for i, w := range []*Activities{w1, w2, w1, w2, w1, w2} {
		id := "M" + strconv.Itoa(i)
		batches[i%2] = append(batches[i%2], MergeAtom{Branch: pushed(t, w, repo, seed, id, `echo x > `+id+`.txt`), Atom: id, Attempt: 1})
	}
	var wg sync.WaitGroup
	var errs [2]error
	for i, w := range []*Activities{w1, w2} {
		wg.Go(func() {
			var r MergeBatchResult
			r, errs[i] = w.MergeBatch(context.Background(), MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1", Atoms: batches[i]})
			for _, a := range r.Atoms {
				if a.Conflict || a.Error != "" {
					errs[i] = fmt.Errorf("%+v", r)
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("batch %d: %v", i, err)
		}
	}
	log := gitT(t, repo, "log", "--format=%B", "main")
	for i := range 6 {
		if n := strings.Count(log, "Aot-Atom: M"+strconv.Itoa(i)+"\n"); n != 1 {
			t.Errorf("atom M%d merged %d times", i, n)
		}
	}
	for _, b := range append(batches[0], batches[1]...) {
		if branchOf(t, repo, b.Branch) != "" {
			t.Errorf("branch %s is still on the remote", b.Branch)
		}
	}
}

// The next attempt starts on the head its worker's last merge wrote into
// the clone; when that clone was made again meanwhile (here: an older copy
// put back in its place, as a worker sharing the cache folder might have
// cloned anew), the attempt does not take the head for granted: the clone
// is fetched and the attempt runs.
func TestAnAttemptStartsOnTheHeadItsWorkersMergeWroteEvenInACloneMadeAgain(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	ctx := context.Background()
	merge := func(atom string, base string) string {
		t.Helper()
		res, err := a.MergeBatch(ctx, MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1",
			Atoms: []MergeAtom{{Branch: pushed(t, a, repo, base, atom, "echo "+atom+" > "+atom+".txt"), Atom: atom, Attempt: 1, Message: atom}}})
		if err != nil || res.Commit == "" || res.Atoms[0].Error != "" {
			t.Fatalf("merge %s: %+v, %v", atom, res, err)
		}
		return res.Commit
	}
	head := merge("A", seed)
	r, err := a.Attempt(ctx, attemptInput(repo, head, "B", `test -f A.txt && echo b > B.txt && echo '{"success": true}'`))
	if err != nil || r.Commit == "" {
		t.Fatalf("the attempt on the merged head: %+v, %v", r, err)
	}

	clones, _ := filepath.Glob(filepath.Join(a.Cache, "repos", "*", ".git"))
	if len(clones) != 1 {
		t.Fatalf("clones: %v", clones)
	}
	clone := filepath.Dir(clones[0])
	older := t.TempDir() + "/clone"
	if out, err := exec.Command("cp", "-a", clone, older).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	head = merge("C", head)
	if err := os.RemoveAll(clone); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(older, clone); err != nil {
		t.Fatal(err)
	}
	r, err = a.Attempt(ctx, attemptInput(repo, head, "D", `test -f C.txt && echo d > D.txt && echo '{"success": true}'`))
	if err != nil || r.Commit == "" {
		t.Fatalf("the attempt on a head the clone made again lacks: %+v, %v", r, err)
	}
}

// A batch of branches this worker pushed itself, onto the head its own
// last merge pushed, merges without fetching (here the clone cannot fetch
// at all); when another worker's retry replaced one of those branches
// meanwhile, the push's lease refuses the batch, and it is merged again on
// what the remote holds: the retry's work lands, not the replaced one.
func TestAMergeOfItsOwnPushesNeedsNoFetchAndALeaseCatchesAReplacedBranch(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a, b := newActivities(t), newActivities(t)
	ctx := context.Background()
	batch := func(w *Activities, atom, base, script string) MergeBatchResult {
		t.Helper()
		branch := pushed(t, w, repo, base, atom, script)
		res, err := w.MergeBatch(ctx, MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1", Atoms: []MergeAtom{{Branch: branch, Atom: atom, Attempt: 1, Message: atom}}})
		if err != nil || res.Atoms[0].Error != "" || res.Atoms[0].Conflict {
			t.Fatalf("merge %s: %+v, %v", atom, res, err)
		}
		return res
	}
	head := batch(a, "P", seed, "echo p > p.txt").Commit

	clones, _ := filepath.Glob(filepath.Join(a.Cache, "repos", "*", ".git"))
	if len(clones) != 1 {
		t.Fatalf("clones: %v", clones)
	}
	clone := filepath.Dir(clones[0])
	gitT(t, clone, "remote", "set-url", "origin", filepath.Join(t.TempDir(), "nowhere.git"))
	res := batch(a, "Q", head, "echo q > q.txt")
	if got := branchOf(t, repo, "main"); got != res.Commit || gitT(t, repo, "show", "main:q.txt") != "q" {
		t.Fatalf("main at %s, the batch says %s", got, res.Commit)
	}
	gitT(t, clone, "remote", "set-url", "origin", repo)
	head = res.Commit

	// X pushed by a, then replaced by b's retry of the same attempt.
	in := attemptInput(repo, head, "X", `echo from-a > x.txt && echo '{"success": true}'`)
	if r, err := a.Attempt(ctx, in); err != nil || r.Commit == "" {
		t.Fatalf("a's attempt: %+v, %v", r, err)
	}
	in.Agent.Command = `echo from-b > x.txt && echo '{"success": true}'`
	retry, err := b.Attempt(ctx, in)
	if err != nil || branchOf(t, repo, in.Branch) != retry.Commit {
		t.Fatalf("b's retry: %+v, %v", retry, err)
	}
	res, err = a.MergeBatch(ctx, MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1", Atoms: []MergeAtom{{Branch: in.Branch, Atom: "X", Attempt: 1, Message: "X"}}})
	if err != nil || res.Atoms[0].Error != "" {
		t.Fatalf("merge X: %+v, %v", res, err)
	}
	if got := gitT(t, repo, "show", "main:x.txt"); got != "from-b" || branchOf(t, repo, "main") != res.Commit {
		t.Errorf("main's x.txt is %q, want the retry's from-b", got)
	}
}

// A batch told each attempt's commit, base and files (as the workflow
// passes them from the attempts' results) merges as one that asks git:
// the same files, the same conflict; an atom whose branch no longer holds
// the commit it reported is merged as its branch says.
func TestMergeBatchTrustsAnAttemptsReportOnlyForItsOwnCommit(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{"shared.txt": "one\n"})
	a := newActivities(t)
	ctx := context.Background()
	atom := func(id, script string) MergeAtom {
		t.Helper()
		in := attemptInput(repo, seed, id, script+` && echo '{"success": true}'`)
		r, err := a.Attempt(ctx, in)
		if err != nil || r.Commit == "" || r.Base != seed || len(r.RepoFiles) == 0 {
			t.Fatalf("attempt %s: %+v, %v", id, r, err)
		}
		return MergeAtom{Branch: in.Branch, Atom: id, Attempt: 1, Message: id, Commit: r.Commit, Base: r.Base, Files: r.RepoFiles}
	}
	atoms := []MergeAtom{atom("A", "echo a > a.txt"), atom("C", "echo c > shared.txt"), atom("D", "echo d > shared.txt"), atom("E", "mkdir -p sub && echo e > sub/e.txt")}
	if !cmp.Equal(atoms[3].Files, []string{"sub/e.txt"}) {
		t.Errorf("E's files as the attempt reports them: %v", atoms[3].Files)
	}
	// E's report is stale: its branch holds another commit now.
	atoms[3].Commit, atoms[3].Files = seed, []string{"z.txt"}
	res, err := a.MergeBatch(ctx, MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1", Atoms: atoms})
	if err != nil || len(res.Atoms) != 4 {
		t.Fatalf("the batch: %+v, %v", res, err)
	}
	rA, rC, rD, rE := res.Atoms[0], res.Atoms[1], res.Atoms[2], res.Atoms[3]
	if diff := cmp.Diff([][]string{{"a.txt"}, {"shared.txt"}, {"sub/e.txt"}}, [][]string{rA.Files, rC.Files, rE.Files}); diff != "" || rA.Conflict || rC.Conflict || rE.Conflict {
		t.Errorf("merged files (-want +got):\n%s", diff)
	}
	if !rD.Conflict || !cmp.Equal(rD.Files, []string{"shared.txt"}) {
		t.Errorf("D changes shared.txt as C did: want a conflict on it, got %+v", rD)
	}
	if got := gitT(t, repo, "ls-tree", "-r", "--name-only", "main"); got != "README.md\na.txt\nshared.txt\nsub/e.txt" {
		t.Errorf("main holds:\n%s", got)
	}
}
