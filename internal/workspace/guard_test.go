package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWorktreesLiveOutsideTheRepositoryByDefault(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	for _, p := range []string{a.Path, m.IntegrationDir()} {
		if strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Errorf("%s is inside the repository %s", p, root)
		}
		want := filepath.Join(realPath(cache), "aot", "worktrees") + string(filepath.Separator) + "project-"
		if !strings.HasPrefix(p, want) || filepath.Base(filepath.Dir(p)) != "L" {
			t.Errorf("%s is not in %s<hash>/L/", p, want)
		}
	}

	// Another repository of the same name gets its own folder.
	other := newRepo(t, map[string]string{"README": "y\n"})
	if DefaultDir(realPath(filepath.Join(root, ".git"))) == DefaultDir(realPath(filepath.Join(other, ".git"))) {
		t.Error("two repositories named project share a worktree folder")
	}

	// Options.Dir moves them.
	dir := filepath.Join(t.TempDir(), "trees")
	m2 := start(t, root, Options{LoopID: "M", Dir: dir})
	if b := create(t, m2, "B", 1); filepath.Dir(b.Path) != filepath.Join(realPath(dir), "M") {
		t.Errorf("with Dir %s the attempt is at %s", dir, b.Path)
	}
}

func TestLoopsWhoseIDsShareAPrefixNeverTouchEachOther(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	ctx := context.Background()
	loops := map[string]*Manager{}
	attempts := map[string]Attempt{}
	for _, id := range []string{"L", "L1", "L-1"} {
		loops[id] = start(t, root, Options{LoopID: id})
		attempts[id] = create(t, loops[id], "A", 1)
	}
	// L resumes after a crash: its orphans go, the others' live attempts stay.
	m, err := Open(ctx, root, Options{LoopID: "L"})
	if err != nil {
		t.Fatal(err)
	}
	removed, err := m.CleanOrphans(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Path != attempts["L"].Path {
		t.Errorf("L's clean-up removed %+v", removed)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a := create(t, m, "A", 2)
	write(t, a.Dir, "L.txt", "L\n")
	finish(t, m, a)
	remove(t, m, a)
	if l, err := m.Land(ctx); err != nil || !l.Landed {
		t.Fatalf("L's landing: %+v, %v", l, err)
	}
	for _, id := range []string{"L1", "L-1"} {
		x := attempts[id]
		if !exists(x.Path, "README") || run(t, root, "branch", "--list", x.Branch) == "" || run(t, root, "branch", "--list", loops[id].Branch()) == "" {
			t.Errorf("loop %s lost its attempt or branches", id)
		}
		write(t, x.Dir, id+".txt", id+"\n")
		if mr := finish(t, loops[id], x); mr.Commit == "" {
			t.Errorf("loop %s could not merge after L ended", id)
		}
	}
}

func TestWorktreesAreLockedWhileInUse(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	locked := map[string]string{}
	wts, err := m.worktrees(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wts {
		if w.locked {
			locked[w.path] = w.reason
		}
	}
	want := map[string]string{a.Path: "aot: in use by loop L", m.intPath: "aot: in use by loop L"}
	if diff := cmp.Diff(want, locked); diff != "" {
		t.Errorf("locked worktrees (-want +got):\n%s", diff)
	}
	// git worktree prune, or a person's git worktree remove without
	// --force twice, leaves a locked worktree alone.
	os.Rename(a.Path, a.Path+".moved")
	run(t, root, "worktree", "prune")
	os.Rename(a.Path+".moved", a.Path)
	if _, err := gitOut(root, "worktree", "remove", "--force", a.Path); err == nil {
		t.Error("a worktree in use was removed by a plain git worktree remove --force")
	}
	write(t, a.Dir, "A.txt", "a\n")
	if mr := finish(t, m, a); mr.Commit == "" {
		t.Error("the attempt did not merge")
	}
	remove(t, m, a)
	assertGone(t, root, a)
}

func TestAnAttemptThatLeftItsBranchIsNeitherCommittedNorMerged(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	mainBefore := run(t, root, "rev-parse", "main")

	// Switched to the person's main and committed there.
	a := create(t, m, "A", 1)
	run(t, a.Path, "switch", "-q", "--ignore-other-worktrees", "main")
	write(t, a.Path, "A.txt", "a\n")
	run(t, a.Path, "add", "A.txt")
	run(t, a.Path, "commit", "-q", "-m", "agent on main")
	agentCommit := run(t, root, "rev-parse", "main")
	write(t, a.Path, "more.txt", "uncommitted\n")
	_, err := m.Finish(context.Background(), a, "A", nil)
	var left *LeftBranchError
	if !errors.As(err, &left) {
		t.Fatalf("Finish: %v, want a LeftBranchError", err)
	}
	if left.Head != "main" || len(left.Elsewhere) != 1 || !strings.HasPrefix(left.Elsewhere[0], agentCommit[:12]+" agent on main") {
		t.Errorf("reported %+v", left)
	}
	if got := run(t, root, "rev-list", "--count", mainBefore+"..main"); got != "1" {
		t.Errorf("main gained %s commits, want only the agent's own", got)
	}
	if run(t, root, "rev-parse", "refs/heads/"+m.Branch()) != mainBefore {
		t.Error("the integration branch took the attempt")
	}
	remove(t, m, a)

	// Committed on a new branch, then came back: on its branch, but the
	// commit elsewhere is reported.
	b := create(t, m, "B", 1)
	run(t, b.Path, "switch", "-q", "-c", "side")
	run(t, b.Path, "commit", "-q", "--allow-empty", "-m", "on the side")
	run(t, b.Path, "switch", "-q", b.Branch)
	if _, err := m.Finish(context.Background(), b, "B", nil); !errors.As(err, &left) || left.Head != "" || len(left.Elsewhere) != 1 {
		t.Errorf("Finish after a commit on another branch: %v", err)
	}
	remove(t, m, b)

	// A detached HEAD.
	c := create(t, m, "C", 1)
	run(t, c.Path, "switch", "-q", "--detach")
	if _, err := m.Finish(context.Background(), c, "C", nil); !errors.As(err, &left) || !strings.HasPrefix(left.Head, "a detached HEAD at ") {
		t.Errorf("Finish on a detached HEAD: %v", err)
	}
	remove(t, m, c)

	// The agent's own commits on its branch are taken, squashed.
	d := create(t, m, "D", 1)
	write(t, d.Dir, "D.txt", "d\n")
	run(t, d.Path, "add", "D.txt")
	run(t, d.Path, "commit", "-q", "-m", "agent's own commit on its branch")
	if mr := finish(t, m, d); mr.Commit == "" || strings.Join(mr.Changed, ",") != "D.txt" {
		t.Errorf("the agent's commit on its branch: %+v", mr)
	}
}

func TestAResumedRunFindsTheMergesOfTheRunBefore(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	ctx := context.Background()
	crashed := start(t, root, Options{LoopID: "L"})
	a := create(t, crashed, "A", 3)
	write(t, a.Dir, "A.txt", "a\n")
	var noted string
	mr, err := crashed.FinishNoting(ctx, a, "A: do A", nil, func(commit string, changed []string) error {
		// The intent comes before the merge.
		if run(t, root, "rev-parse", "refs/heads/"+crashed.Branch()) == commit {
			t.Error("the merge happened before its intent")
		}
		noted = commit + " " + strings.Join(changed, ",")
		return nil
	})
	if err != nil || mr.Commit == "" || !strings.HasSuffix(noted, " A.txt") {
		t.Fatalf("FinishNoting: %+v, %v (noted %q)", mr, err, noted)
	}
	// An intent that cannot be recorded merges nothing.
	b := create(t, crashed, "B", 1)
	write(t, b.Dir, "B.txt", "b\n")
	if _, err := crashed.FinishNoting(ctx, b, "B", nil, func(string, []string) error { return errors.New("disk full") }); err == nil {
		t.Error("FinishNoting merged although its intent failed")
	}
	// The engine dies here; the next run starts again.
	m, err := Open(ctx, root, Options{LoopID: "L"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CleanOrphans(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := m.Merged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []MergedAttempt{{Atom: "A", Number: 3, Commit: mr.Commit, Changed: []string{"A.txt"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Merged (-want +got):\n%s", diff)
	}
}

func TestCommitsSurviveGitGCPruneAtEveryStep(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	gc := func() { run(t, root, "gc", "-q", "--prune=now") }
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	b := create(t, m, "B", 1)
	write(t, a.Dir, "A.txt", "a\n")
	write(t, b.Dir, "B.txt", "b\n")
	gc()
	finish(t, m, a)
	gc()
	finish(t, m, b) // merged on top of A: a commit aot made itself
	gc()
	remove(t, m, a)
	remove(t, m, b)
	run(t, root, "fsck", "--no-progress", "--no-dangling")
	if l, err := m.Land(context.Background()); err != nil || !l.Landed || read(t, root, "A.txt") != "a\n" || read(t, root, "B.txt") != "b\n" {
		t.Fatalf("landing after gc: %+v, %v", l, err)
	}
}

func TestLandNeverOverwritesAnIgnoredFile(t *testing.T) {
	root := newRepo(t, map[string]string{".gitignore": ".env\n"})
	write(t, root, ".env", "SECRET=hunter2\n")
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	write(t, a.Dir, ".env", "SECRET=changeme\n")
	run(t, a.Dir, "add", "-f", ".env")
	finish(t, m, a)
	remove(t, m, a)
	before := run(t, root, "rev-parse", "main")
	l, err := m.Land(context.Background())
	if err != nil || l.Landed || !strings.Contains(l.Message, "untracked or ignored file .env") || !strings.Contains(l.Message, "git merge aot/L") {
		t.Fatalf("landing %+v, %v", l, err)
	}
	if read(t, root, ".env") != "SECRET=hunter2\n" || run(t, root, "rev-parse", "main") != before {
		t.Error("the landing touched the person's ignored file or branch")
	}
	if exists(m.intPath, ".") || run(t, root, "rev-parse", "refs/heads/aot/L") == before {
		t.Error("the work should stay on aot/L without its worktree")
	}
}

func TestLeaveKeepsTheWorkForALaterLanding(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	ctx := context.Background()
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	write(t, a.Dir, "A.txt", "a\n")
	finish(t, m, a)
	remove(t, m, a)
	before := run(t, root, "rev-parse", "main")
	l, err := m.Leave(ctx, "the loop did not complete (stopped)")
	if err != nil || l.Landed || l.Commits != 1 || !strings.Contains(l.Message, "not landed: the loop did not complete (stopped); to take them anyway, run `git merge aot/L`") {
		t.Fatalf("Leave: %+v, %v", l, err)
	}
	if run(t, root, "rev-parse", "main") != before || exists(root, "A.txt") || len(worktreeList(t, root)) != 1 {
		t.Error("Leave touched the person's branch or left a worktree")
	}
	// The resumed loop completes and lands it.
	m = start(t, root, Options{LoopID: "L"})
	if l, err := m.Land(ctx); err != nil || !l.Landed || read(t, root, "A.txt") != "a\n" {
		t.Fatalf("the later landing: %+v, %v", l, err)
	}
}

func TestPathsWithNewlinesQuotesAndUnicode(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "it's \"odd\"\nnew line ü")
	root := filepath.Join(parent, "proj")
	os.MkdirAll(root, 0o755)
	run(t, root, "init", "-q", "-b", "main")
	write(t, root, "sub dir\nx/README", "x\n")
	run(t, root, "add", "-A")
	run(t, root, "commit", "-q", "-m", "initial")
	m := start(t, filepath.Join(root, "sub dir\nx"), Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	write(t, a.Dir, "new\nfile \"q\".txt", "a\n")
	if mr := finish(t, m, a); strings.Join(mr.Changed, ",") != "new\nfile \"q\".txt" {
		t.Errorf("changed %q", mr.Changed)
	}
	remove(t, m, a)
	if l, err := m.Land(context.Background()); err != nil || !l.Landed || read(t, root, "sub dir\nx/new\nfile \"q\".txt") != "a\n" {
		t.Fatalf("landing %+v, %v", l, err)
	}
}
