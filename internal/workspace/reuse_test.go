package workspace

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A worktree released by one attempt serves the next: it holds exactly the
// next attempt's start (nothing the last agent changed, added or ignored,
// nor the engine's files), its commit is the next attempt's alone, and the
// commits the earlier attempt made in it are not taken for work done on
// another branch.
func TestAReleasedWorktreeServesTheNextAttemptAsANewOne(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n", ".gitignore": "*.log\n"})
	first := run(t, root, "rev-parse", "HEAD")
	write(t, root, "b.txt", "b\n")
	run(t, root, "add", "-A")
	run(t, root, "commit", "-q", "-m", "second")
	second := run(t, root, "rev-parse", "HEAD")
	run(t, root, "reset", "-q", "--hard", first)
	ctx := context.Background()
	slot := filepath.Join(t.TempDir(), "wt")

	m1, err := Open(ctx, root, Options{LoopID: "L", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m1.StartDetached(first)
	a1 := m1.Plan("A", 1)
	a1.Path, a1.Dir = slot, slot
	if err := m1.CreateAt(ctx, a1); err != nil {
		t.Fatal(err)
	}
	write(t, slot, "a.txt", "changed by A\n")
	write(t, slot, "left.txt", "committed by A\n")
	mr1 := finish(t, m1, a1, "a.txt", "left.txt")
	if mr1.Commit == "" {
		t.Fatalf("the first attempt committed nothing: %+v", mr1)
	}
	// What an agent may leave that is not committed.
	write(t, slot, "untracked/x.txt", "x\n")
	write(t, slot, "build.log", "ignored\n")
	write(t, slot, ".claude/aot-loop-state.md", "the engine's\n")
	if err := m1.Release(ctx, a1); err != nil {
		t.Fatal(err)
	}
	if out, _ := gitOut(root, "rev-parse", "--verify", "-q", "refs/heads/"+a1.Branch); out != "" {
		t.Errorf("the released attempt's branch is still there: %s", out)
	}

	// The next attempt's manager is a copy of the first's, at its start.
	m2 := m1.Detached(second)
	a2 := m2.Plan("B", 1)
	a2.Path, a2.Dir = slot, slot
	if err := m2.Reuse(ctx, a2); err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, slot, ".git")
	want := map[string]string{"a.txt": "a\n", "b.txt": "b\n", ".gitignore": "*.log\n"}
	if !maps.Equal(got, want) {
		t.Errorf("the reused worktree holds %v, want the start's files %v", got, want)
	}
	if head := run(t, slot, "symbolic-ref", "HEAD"); head != "refs/heads/"+a2.Branch {
		t.Errorf("the reused worktree is on %s, want %s", head, a2.Branch)
	}
	write(t, slot, "c.txt", "c\n")
	mr2, err := m2.Finish(ctx, a2, "B", []string{"c.txt"})
	if err != nil {
		var left *LeftBranchError
		if errors.As(err, &left) {
			t.Fatalf("the earlier attempt's commit was taken for the agent's: %v", err)
		}
		t.Fatal(err)
	}
	if !slices.Equal(mr2.Changed, []string{"c.txt"}) {
		t.Errorf("the second attempt changed %v, want only c.txt", mr2.Changed)
	}
	if parent := run(t, root, "rev-parse", mr2.Commit+"^"); parent != second {
		t.Errorf("the second commit's parent is %s, want its start %s", parent, second)
	}
	if files := run(t, root, "ls-tree", "-r", "--name-only", mr2.Commit); strings.Contains(files, "left.txt") || strings.Contains(files, "aot-loop-state") {
		t.Errorf("the second commit holds the first attempt's or the engine's files:\n%s", files)
	}
}

// A folder that holds no worktree cannot be reused: the caller makes a new
// one there.
func TestReuseRefusesAFolderThatIsNoWorktree(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	m, err := Open(context.Background(), root, Options{LoopID: "L", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m.StartDetached(run(t, root, "rev-parse", "HEAD"))
	a := m.Plan("A", 1)
	a.Path = t.TempDir()
	a.Dir = a.Path
	if err := m.Reuse(context.Background(), a); err == nil {
		t.Error("Reuse of an empty folder succeeded")
	}
}

// A worktree whose .git file an agent pointed elsewhere is not reused: git
// would run on another repository.
func TestReuseRefusesAWorktreeWhoseGitFileWasRewritten(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	// Another repository holding the same commit, where git would succeed.
	other := filepath.Join(t.TempDir(), "other")
	run(t, root, "clone", "-q", root, other)
	ctx := context.Background()
	m, err := Open(ctx, root, Options{LoopID: "L", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m.StartDetached(run(t, root, "rev-parse", "HEAD"))
	a := m.Plan("A", 1)
	a.Path = filepath.Join(t.TempDir(), "wt")
	a.Dir = a.Path
	if err := m.CreateAt(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	write(t, a.Path, ".git", "gitdir: "+filepath.Join(other, ".git")+"\n")
	write(t, other, "untracked.txt", "theirs\n")
	next := m.Detached(run(t, root, "rev-parse", "HEAD"))
	b := next.Plan("B", 1)
	b.Path, b.Dir = a.Path, a.Path
	if err := next.Reuse(ctx, b); err == nil {
		t.Error("a worktree whose .git names another repository was reused")
	}
	if !exists(other, "untracked.txt") || run(t, other, "status", "--porcelain") != "?? untracked.txt" {
		t.Error("the other repository was touched")
	}
}

// A worktree whose index goes missing between Reuse's checkout and its
// clean (the clean then deletes every file, as it did under load on a
// worker) is not reused: the attempt's commit would delete the files from
// the integration branch. Reuse says so, and the caller makes a new one.
func TestReuseRefusesAWorktreeThatIsNotItsStartAfterTheCheckout(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n"})
	ctx := context.Background()
	m, err := Open(ctx, root, Options{LoopID: "L", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	head := run(t, root, "rev-parse", "HEAD")
	m.StartDetached(head)
	a := m.Plan("A", 1)
	a.Path = filepath.Join(t.TempDir(), "wt")
	a.Dir = a.Path
	if err := m.CreateAt(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	m2 := m.Detached(head)
	b := m2.Plan("B", 1)
	b.Path, b.Dir = a.Path, a.Path
	afterCheckout = func(admin string) { os.Remove(filepath.Join(admin, "index")) }
	t.Cleanup(func() { afterCheckout = func(string) {} })
	refused := ReuseRefusals()
	err = m2.Reuse(ctx, b)
	if err == nil || !strings.Contains(err.Error(), "is not "+head) {
		t.Fatalf("Reuse of a worktree the clean emptied: %v, want it refused", err)
	}
	if ReuseRefusals() != refused+1 {
		t.Errorf("refusals counted: %d, want %d", ReuseRefusals(), refused+1)
	}
	afterCheckout = func(string) {}
	if err := m2.Reuse(ctx, b); err != nil {
		t.Fatalf("Reuse once the fault is gone: %v", err)
	}
	if got := snapshot(t, a.Path, ".git"); !maps.Equal(got, map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n"}) {
		t.Errorf("the reused worktree holds %v", got)
	}
}
