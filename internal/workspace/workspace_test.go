package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDisjointAttemptsFromOneBaseBothMerge(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "hello\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	b := create(t, m, "B", 1)
	write(t, a.Dir, "a.txt", "from A\n")
	write(t, b.Dir, "dir/b.txt", "from B\n")

	ma := finish(t, m, a, "a.txt")
	mb := finish(t, m, b, "dir/b.txt")
	if diff := cmp.Diff(Merge{Changed: []string{"a.txt"}, Commit: ma.Commit}, ma); diff != "" || ma.Commit == "" {
		t.Errorf("A's merge (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Merge{Changed: []string{"dir/b.txt"}, Commit: mb.Commit}, mb); diff != "" || mb.Commit == "" {
		t.Errorf("B's merge (-want +got):\n%s", diff)
	}
	if got := read(t, m.IntegrationDir(), "a.txt") + read(t, m.IntegrationDir(), "dir/b.txt"); got != "from A\nfrom B\n" {
		t.Errorf("integration worktree holds %q", got)
	}
	// Linear history: two ordinary commits on top of the start, no merge commit.
	if got := run(t, root, "log", "--format=%P", "main.."+m.Branch()); strings.Count(got, "\n") != 1 || strings.Contains(got, " ") {
		t.Errorf("integration history:\n%s", got)
	}
}

func TestSameFileFromOneBaseConflictsThenMergesWhenRerun(t *testing.T) {
	root := newRepo(t, map[string]string{"log.txt": "start\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	b := create(t, m, "B", 1)
	// Both read-modify-write the same file.
	write(t, a.Dir, "log.txt", read(t, a.Dir, "log.txt")+"A\n")
	write(t, b.Dir, "log.txt", read(t, b.Dir, "log.txt")+"B\n")

	ma := finish(t, m, a)
	mb := finish(t, m, b)
	if ma.Conflict || ma.Commit == "" {
		t.Fatalf("first merge: %+v", ma)
	}
	want := Merge{Changed: []string{"log.txt"}, Conflict: true, ConflictFiles: []string{"log.txt"}, Unclaimed: []string{"log.txt"}}
	if diff := cmp.Diff(want, mb); diff != "" {
		t.Errorf("second merge (-want +got):\n%s", diff)
	}
	if got := read(t, m.IntegrationDir(), "log.txt"); got != "start\nA\n" {
		t.Errorf("after the conflict the integration holds %q: something was overwritten", got)
	}
	remove(t, m, b)

	// The re-run starts from the merged result.
	b2 := create(t, m, "B", 2)
	write(t, b2.Dir, "log.txt", read(t, b2.Dir, "log.txt")+"B\n")
	if mr := finish(t, m, b2); mr.Conflict || mr.Commit == "" {
		t.Fatalf("re-run: %+v", mr)
	}
	if got := read(t, m.IntegrationDir(), "log.txt"); got != "start\nA\nB\n" {
		t.Errorf("both changes should be present, got %q", got)
	}
}

func TestGitMergeConflictIsReportedAndMergesNothing(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	b := create(t, m, "B", 1)
	write(t, a.Dir, "x", "a file\n")
	write(t, b.Dir, "x/y", "a file in a folder of the same name\n")
	finish(t, m, a)
	before := run(t, root, "rev-parse", m.Branch())
	mb := finish(t, m, b)
	if !mb.Conflict || mb.Commit != "" || len(mb.ConflictFiles) == 0 {
		t.Errorf("want a conflict, got %+v", mb)
	}
	if after := run(t, root, "rev-parse", m.Branch()); after != before {
		t.Errorf("the integration branch moved on a conflict")
	}
}

func TestDependentAttemptSeesItsDependencysChanges(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	write(t, a.Dir, "api.go", "package api\n")
	finish(t, m, a)
	remove(t, m, a)
	b := create(t, m, "B", 1)
	if got := read(t, b.Dir, "api.go"); got != "package api\n" {
		t.Errorf("dependent sees %q", got)
	}
}

func TestWorkerDirectoryIsNeverTheRepository(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	real, _ := filepath.EvalSymlinks(root)
	for _, dir := range []string{a.Dir, a.Path, m.IntegrationDir()} {
		if dir == real || dir == root {
			t.Fatalf("%s is the repository", dir)
		}
		if top := run(t, dir, "rev-parse", "--show-toplevel"); top == real {
			t.Errorf("git in %s works on the repository itself", dir)
		}
	}
	if got := run(t, a.Dir, "rev-parse", "--abbrev-ref", "HEAD"); got != a.Branch {
		t.Errorf("the worktree is on %q, want %q", got, a.Branch)
	}
	if got := run(t, root, "status", "--porcelain"); got != "" {
		t.Errorf("the person's working tree changed:\n%s", got)
	}
}

func TestCommitsNameTheirAtoms(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "parse-config", 3)
	write(t, a.Dir, "config.go", "package config\n")
	if _, err := m.Finish(context.Background(), a, "parse-config: read the YAML config", nil); err != nil {
		t.Fatal(err)
	}
	got := run(t, root, "log", "-1", "--format=%an <%ae>%n%B", m.Branch())
	want := "aot loop <aot-loop@localhost>\nparse-config: read the YAML config\n\nAot-Loop: L\nAot-Atom: parse-config\nAot-Attempt: 3"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commit (-want +got):\n%s", diff)
	}
}

func TestClaimsAreComparedWithWhatChanged(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n", "old.txt": "old\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	write(t, a.Dir, "src/a.go", "a\n")
	write(t, a.Dir, "src/b.go", "b\n")
	write(t, a.Dir, "notes.md", "n\n")
	os.Remove(filepath.Join(a.Dir, "old.txt"))
	mr := finish(t, m, a, "src", "./missing.go", filepath.Join(a.Dir, "old.txt"))
	want := Merge{
		Changed:   []string{"notes.md", "old.txt", "src/a.go", "src/b.go"},
		Commit:    mr.Commit,
		Unclaimed: []string{"notes.md"},
		Missing:   []string{"missing.go"},
	}
	if diff := cmp.Diff(want, mr); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
}

func TestNoChangeMergesNothing(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	mr := finish(t, m, a, "README")
	if diff := cmp.Diff(Merge{Changed: []string{}, Missing: []string{"README"}}, mr); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
	if got := run(t, root, "rev-list", "--count", "main.."+m.Branch()); got != "0" {
		t.Errorf("%s commits for no change", got)
	}
}

func TestRemoveLeavesNoWorktreeNorBranch(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	base := worktreeList(t, root)
	a := create(t, m, "A", 1)
	write(t, a.Dir, "half-done.txt", "x\n")
	// Killed: the run's context is gone, cleanup still happens.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Remove(ctx, a); err != nil {
		t.Fatal(err)
	}
	assertGone(t, root, a)
	if diff := cmp.Diff(base, worktreeList(t, root)); diff != "" {
		t.Errorf("worktrees (-want +got):\n%s", diff)
	}
	// Removing what was never (fully) created is fine too.
	half := m.Plan("B", 1)
	os.MkdirAll(half.Path, 0o700)
	if err := m.Remove(context.Background(), half); err != nil {
		t.Fatal(err)
	}
	assertGone(t, root, half)
}

func assertGone(t *testing.T, root string, a Attempt) {
	t.Helper()
	if exists(a.Path, "") {
		t.Errorf("%s still exists", a.Path)
	}
	for _, w := range worktreeList(t, root) {
		if w == a.Path {
			t.Errorf("%s is still a worktree", a.Path)
		}
	}
	if got := run(t, root, "branch", "--list", a.Branch); got != "" {
		t.Errorf("branch %s still exists", got)
	}
}

func TestAbandonKeepsFailedAttemptsWhenAsked(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	ctx := context.Background()

	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	if kept, err := m.Abandon(ctx, a); err != nil || kept {
		t.Fatalf("Abandon without KeepFailed: kept %v, %v", kept, err)
	}
	assertGone(t, root, a)

	m = start(t, root, Options{LoopID: "L", KeepFailed: true})
	a = create(t, m, "A", 2)
	write(t, a.Dir, "evidence.txt", "why it failed\n")
	if kept, err := m.Abandon(ctx, a); err != nil || !kept {
		t.Fatalf("Abandon with KeepFailed: kept %v, %v", kept, err)
	}
	list, err := m.Kept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Attempt{a}, list); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if removed, err := m.CleanOrphans(ctx, nil); err != nil || len(removed) != 0 {
		t.Errorf("CleanOrphans removed a kept attempt: %v, %v", removed, err)
	}
	if got := read(t, a.Dir, "evidence.txt"); got != "why it failed\n" {
		t.Errorf("kept worktree holds %q", got)
	}
	remove(t, m, a)
	assertGone(t, root, a)
}

func TestCleanOrphansAfterACrash(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	ctx := context.Background()
	crashed := start(t, root, Options{LoopID: "L"})
	a := create(t, crashed, "A", 1)
	b := create(t, crashed, "B", 4)
	c := create(t, crashed, "C", 1)
	write(t, a.Dir, "x.txt", "unfinished\n")
	os.RemoveAll(b.Path)                        // a folder already gone, still registered
	half := crashed.Plan("D", 1)                // killed while git created it
	os.MkdirAll(half.Path, 0o700)               // a folder git never registered
	run(t, root, "branch", "aot-attempt/L/E-2") // a branch without a worktree
	other := create(t, start(t, root, Options{LoopID: "other"}), "A", 1)
	// The manager is dropped without any cleanup: the engine was killed.

	m, err := Open(ctx, root, Options{LoopID: "L"})
	if err != nil {
		t.Fatal(err)
	}
	removed, err := m.CleanOrphans(ctx, func(x Attempt) bool { return x.Path == c.Path })
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range removed {
		names = append(names, fmt.Sprintf("%s#%d", x.Atom, x.Number))
	}
	if diff := cmp.Diff([]string{"A#1", "B#4", "D#1", "E#2"}, names); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	for _, x := range []Attempt{a, b, half, m.Plan("E", 2)} {
		assertGone(t, root, x)
	}
	if !exists(c.Path, "README") || !exists(other.Path, "README") {
		t.Errorf("an attempt to keep, or another loop's, was removed")
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := read(t, create(t, m, "A", 2).Dir, "README"); got != "x\n" {
		t.Errorf("after the clean-up a new attempt reads %q", got)
	}
}

func TestPersonsDirtyTreeIsLeftExactlyAsItWas(t *testing.T) {
	root := newRepo(t, map[string]string{"tracked.txt": "one\n", "staged.txt": "s\n", "README": "x\n"})
	write(t, root, "tracked.txt", "one, edited but not staged\n")
	write(t, root, "staged.txt", "s, staged\n")
	run(t, root, "add", "staged.txt")
	write(t, root, "untracked.txt", "new\n")
	before := snapshot(t, root, ".git/aot-worktrees", ".git/worktrees", ".git/refs/heads/aot", ".git/refs/heads/aot-attempt", ".git/logs", ".git/objects")
	status := run(t, root, "status", "--porcelain")

	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	if got := read(t, a.Dir, "tracked.txt"); got != "one\n" {
		t.Errorf("the worker sees the person's uncommitted edit: %q", got)
	}
	if exists(a.Dir, "untracked.txt") {
		t.Errorf("the worker sees the person's untracked file")
	}
	write(t, a.Dir, "tracked.txt", "one, by the loop\n")
	write(t, a.Dir, "loop.txt", "loop\n")
	finish(t, m, a)
	remove(t, m, a)
	l, err := m.Land(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Landed || l.Branch != "aot/L" || l.Commits != 1 || !strings.Contains(l.Message, "git merge aot/L") {
		t.Errorf("landing: %+v", l)
	}
	after := snapshot(t, root, ".git/aot-worktrees", ".git/worktrees", ".git/refs/heads/aot", ".git/refs/heads/aot-attempt", ".git/logs", ".git/objects")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the person's files or repository state changed (-before +after):\n%s", diff)
	}
	if got := run(t, root, "status", "--porcelain"); got != status {
		t.Errorf("git status was\n%s\nand is\n%s", status, got)
	}
	if got := run(t, root, "show", "aot/L:loop.txt"); got != "loop" {
		t.Errorf("the work is not on aot/L: %q", got)
	}
}

func TestLandFastForwardsACleanTree(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n", ".gitignore": ".claude/\n"})
	write(t, root, ".claude/aot-loop-state.md", "the engine's state\n")
	write(t, root, ".claude/aot-loop/events.ndjson", "{}\n")
	m := start(t, root, Options{LoopID: "L"})
	startHead := run(t, root, "rev-parse", "HEAD")
	for i, atom := range []string{"A", "B"} {
		a := create(t, m, atom, 1)
		write(t, a.Dir, atom+".txt", fmt.Sprint(i)+"\n")
		finish(t, m, a)
		remove(t, m, a)
	}
	l, err := m.Land(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Landing{Landed: true, Branch: "main", Commits: 2, Message: l.Message}, l); diff != "" {
		t.Errorf("landing (-want +got):\n%s", diff)
	}
	if got := run(t, root, "rev-list", "--count", "--merges", startHead+"..main"); got != "0" {
		t.Errorf("%s merge commits", got)
	}
	if read(t, root, "A.txt") != "0\n" || read(t, root, "B.txt") != "1\n" {
		t.Errorf("the working tree was not fast-forwarded")
	}
	if got := run(t, root, "status", "--porcelain"); got != "" {
		t.Errorf("after landing: %s", got)
	}
	if got := read(t, root, ".claude/aot-loop-state.md"); got != "the engine's state\n" {
		t.Errorf("state file: %q", got)
	}
	if got := run(t, root, "branch", "--list", "aot/*", "aot-attempt/*"); got != "" {
		t.Errorf("branches left: %s", got)
	}
	if diff := cmp.Diff([]string{root}, worktreeList(t, root)); diff != "" {
		t.Errorf("worktrees left (-want +got):\n%s", diff)
	}
}

func TestLandLeavesWorkWhenTheBranchMoved(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	write(t, a.Dir, "a.txt", "a\n")
	finish(t, m, a)
	remove(t, m, a)
	write(t, root, "mine.txt", "the person's commit\n")
	run(t, root, "add", "mine.txt")
	run(t, root, "commit", "-q", "-m", "mine")
	mine := run(t, root, "rev-parse", "main")
	l, err := m.Land(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Landed || l.Branch != "aot/L" || !strings.Contains(l.Message, "git merge aot/L") {
		t.Errorf("landing: %+v", l)
	}
	if got := run(t, root, "rev-parse", "main"); got != mine {
		t.Errorf("main moved")
	}
}

func TestLandMovesABranchCheckedOutNowhere(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	write(t, a.Dir, "a.txt", "a\n")
	mr := finish(t, m, a)
	remove(t, m, a)
	run(t, root, "switch", "-q", "-c", "elsewhere")
	write(t, root, "README", "dirty, on another branch\n")
	l, err := m.Land(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !l.Landed || run(t, root, "rev-parse", "main") != mr.Commit {
		t.Errorf("landing: %+v", l)
	}
	if read(t, root, "README") != "dirty, on another branch\n" || exists(root, "a.txt") {
		t.Errorf("the person's working tree changed")
	}
}

func TestEngineFilesAreNeverCopiedNorCommitted(t *testing.T) {
	// The worst case: a person committed the state file and the journal.
	root := newRepo(t, map[string]string{
		"README":                         "x\n",
		".claude/aot-loop-state.md":      "committed state\n",
		".claude/aot-loop/events.ndjson": "committed journal\n",
		".claude/settings.json":          "{}\n",
	})
	write(t, root, ".claude/aot-loop-state.md", "live state\n")
	write(t, root, ".claude/aot-loop-state.md.lock", "")
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	b := create(t, m, "B", 1)
	for _, dir := range []string{a.Dir, m.IntegrationDir()} {
		for _, name := range []string{".claude/aot-loop-state.md", ".claude/aot-loop-state.md.lock", ".claude/aot-loop"} {
			if exists(dir, name) {
				t.Errorf("%s has a copy of %s", dir, name)
			}
		}
		if !exists(dir, ".claude/settings.json") {
			t.Errorf("%s lost the person's other .claude files", dir)
		}
	}
	// An agent writes its own state file and journal, and another commits them.
	write(t, a.Dir, ".claude/aot-loop-state.md", "a confused agent's state\n")
	write(t, a.Dir, ".claude/aot-loop/events.ndjson", "agent\n")
	write(t, a.Dir, "work.txt", "work\n")
	write(t, b.Dir, ".claude/aot-loop-state.md", "another state\n")
	write(t, b.Dir, "more.txt", "more\n")
	run(t, b.Dir, "add", "-A")
	run(t, b.Dir, "commit", "-q", "-m", "the agent commits everything")

	for _, x := range []struct {
		a    Attempt
		want string
	}{{a, "work.txt"}, {b, "more.txt"}} {
		mr := finish(t, m, x.a)
		if diff := cmp.Diff([]string{x.want}, mr.Changed); diff != "" {
			t.Errorf("%s changed (-want +got):\n%s", x.a.Atom, diff)
		}
	}
	if got := run(t, root, "diff", "--name-only", "main", m.Branch()); got != "more.txt\nwork.txt" {
		t.Errorf("the loop's commits change:\n%s", got)
	}
	if got := run(t, root, "log", "--format=%P", "-1", m.Branch()); strings.Contains(got, " ") {
		t.Errorf("the agent's own commit made a merge: %s", got)
	}
	if got := read(t, root, ".claude/aot-loop-state.md"); got != "live state\n" {
		t.Errorf("the real state file changed: %q", got)
	}
}

func TestProjectInASubfolder(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n", "app/main.go": "package main\n"})
	project := filepath.Join(root, "app")
	m := start(t, project, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	if filepath.Base(a.Dir) != "app" || !exists(a.Dir, "main.go") || filepath.Base(m.IntegrationDir()) != "app" {
		t.Fatalf("attempt dir %s, integration %s", a.Dir, m.IntegrationDir())
	}
	write(t, a.Dir, "util.go", "package main\n")
	write(t, a.Path, "top.txt", "outside the project\n")
	mr := finish(t, m, a, "util.go")
	if diff := cmp.Diff([]string{"../top.txt", "util.go"}, mr.Changed); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
}

func TestResumeKeepsWhatEarlierRunsMerged(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	first := start(t, root, Options{LoopID: "L"})
	a := create(t, first, "A", 1)
	write(t, a.Dir, "a.txt", "a\n")
	finish(t, first, a)
	// Crash: no Remove, no Land. The person commits nothing meanwhile.
	m, err := Open(context.Background(), root, Options{LoopID: "L"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CleanOrphans(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !exists(m.IntegrationDir(), "a.txt") {
		t.Fatalf("the resumed run lost the merged work")
	}
	b := create(t, m, "B", 1)
	write(t, b.Dir, "b.txt", "b\n")
	finish(t, m, b)
	remove(t, m, b)
	l, err := m.Land(context.Background())
	if err != nil || !l.Landed || l.Commits != 2 {
		t.Fatalf("landing %+v, %v", l, err)
	}
	if !exists(root, "a.txt") || !exists(root, "b.txt") {
		t.Errorf("landed work is missing")
	}
}

func TestConcurrentFinishesAllMerge(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m := start(t, root, Options{LoopID: "L"})
	const n = 6
	var attempts []Attempt
	for i := range n {
		a := create(t, m, fmt.Sprintf("A%d", i), 1)
		write(t, a.Dir, fmt.Sprintf("f%d.txt", i), "x\n")
		attempts = append(attempts, a)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, a := range attempts {
		wg.Go(func() {
			mr, err := m.Finish(context.Background(), a, "concurrent", nil)
			if err == nil && (mr.Conflict || mr.Commit == "") {
				err = fmt.Errorf("%+v", mr)
			}
			if err == nil {
				err = m.Remove(context.Background(), a)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := run(t, root, "rev-list", "--count", "main.."+m.Branch()); got != fmt.Sprint(n) {
		t.Errorf("%s commits, want %d", got, n)
	}
	for i := range n {
		if !exists(m.IntegrationDir(), fmt.Sprintf("f%d.txt", i)) {
			t.Errorf("f%d.txt missing", i)
		}
	}
}

func TestNotGit(t *testing.T) {
	plain := t.TempDir()
	if _, err := Open(context.Background(), plain, Options{}); !errors.Is(err, ErrNotGit) {
		t.Errorf("plain folder: %v", err)
	}
	empty := t.TempDir()
	run(t, empty, "init", "-q")
	if _, err := Open(context.Background(), empty, Options{}); !errors.Is(err, ErrNotGit) {
		t.Errorf("repository without a commit: %v", err)
	}
}

func TestVersionAtLeast(t *testing.T) {
	for v, want := range map[string]bool{
		"git version 2.39.5":                 true,
		"git version 2.38.0":                 true,
		"git version 2.37.9":                 false,
		"git version 3.0.0":                  true,
		"git version 2.39.3 (Apple Git-146)": true,
		"git version 2.45.1.windows.1":       true,
		"":                                   false,
	} {
		if got := versionAtLeast(v, 2, 38); got != want {
			t.Errorf("versionAtLeast(%q) = %v", v, got)
		}
	}
}

func TestPlanNamesAreStableAndSafe(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	m, err := Open(context.Background(), root, Options{LoopID: "my loop"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.Plan("fix/the bug", 2), m.Plan("fix/the bug", 2)
	if a != b {
		t.Errorf("Plan is not deterministic: %+v %+v", a, b)
	}
	if strings.ContainsAny(filepath.Base(a.Path), "/ ") || strings.Contains(a.Branch, " ") {
		t.Errorf("unsafe names: %+v", a)
	}
	if m.Plan("a_b", 1) == m.Plan("a b", 1) || m.Plan("x", 1).Path == m.IntegrationDir() {
		t.Errorf("two atoms share a name")
	}
	if exists(filepath.Dir(a.Path), "") {
		t.Errorf("Open or Plan created %s", filepath.Dir(a.Path))
	}
	if got := run(t, root, "check-ref-format", "refs/heads/"+a.Branch); got != "" {
		t.Errorf("check-ref-format: %s", got)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	create(t, m, "fix/the bug", 2)
}

func TestUntrackedFilesDoNotStopALandingUnlessTheWorkWouldOverwriteThem(t *testing.T) {
	root := newRepo(t, map[string]string{"README": "x\n"})
	write(t, root, "notes.txt", "my notes\n") // untracked, not in the loop's way
	m := start(t, root, Options{LoopID: "L"})
	a := create(t, m, "A", 1)
	write(t, a.Dir, "A.txt", "a\n")
	finish(t, m, a)
	remove(t, m, a)
	l, err := m.Land(context.Background())
	if err != nil || !l.Landed || read(t, root, "A.txt") != "a\n" || read(t, root, "notes.txt") != "my notes\n" {
		t.Fatalf("landing %+v, %v", l, err)
	}

	// An untracked file the work would overwrite: git refuses, the work
	// stays on its branch, the person's file is untouched.
	write(t, root, "B.txt", "the person's own B\n")
	m = start(t, root, Options{LoopID: "L2"})
	b := create(t, m, "B", 1)
	write(t, b.Dir, "B.txt", "the loop's B\n")
	finish(t, m, b)
	remove(t, m, b)
	l, err = m.Land(context.Background())
	if err != nil || l.Landed || !strings.Contains(l.Message, "git merge aot/L2") {
		t.Fatalf("landing %+v, %v", l, err)
	}
	if read(t, root, "B.txt") != "the person's own B\n" {
		t.Fatal("the person's untracked file was overwritten")
	}
}

// Two loops of one repository that end together both find the person's
// branch where they started: one lands, the other keeps its work on its
// branch, and the person's tree is exactly the landed commit's.
func TestTwoLoopsLandingAtOnceLeaveAConsistentTree(t *testing.T) {
	for round := range 5 {
		root := newRepo(t, map[string]string{"README": "x\n", ".gitignore": ".claude/\n"})
		var ms []*Manager
		for _, loop := range []string{"one", "two"} {
			m := start(t, root, Options{LoopID: fmt.Sprintf("%s-%d", loop, round), StateFile: filepath.Join(root, ".claude", loop, "aot-loop-state.md")})
			a := create(t, m, "A", 1)
			write(t, a.Dir, loop+".txt", loop+"\n")
			finish(t, m, a)
			remove(t, m, a)
			ms = append(ms, m)
		}
		lands := make(chan Landing, 2)
		for _, m := range ms {
			go func() {
				l, err := m.Land(context.Background())
				if err != nil {
					t.Error(err)
				}
				lands <- l
			}()
		}
		landed := 0
		for range ms {
			if l := <-lands; l.Landed {
				landed++
			}
		}
		if landed != 1 {
			t.Fatalf("round %d: %d loops landed, want 1", round, landed)
		}
		if got := run(t, root, "status", "--porcelain"); got != "" {
			t.Fatalf("round %d: the person's tree after both landings:\n%s", round, got)
		}
	}
}

func TestADetachedManagerCommitsTheAttemptAndMergesNothing(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	head := run(t, root, "rev-parse", "HEAD")
	// A commit the attempt starts from that is on no branch, as a worker's
	// attempt starts from the loop's head, not from the clone's HEAD.
	write(t, root, "b.txt", "b\n")
	run(t, root, "add", "-A")
	run(t, root, "commit", "-q", "-m", "base")
	base := run(t, root, "rev-parse", "HEAD")
	run(t, root, "reset", "-q", "--hard", head)
	skip := []string{".git/worktrees", ".git/refs/heads/aot-attempt", ".git/logs", ".git/objects"}
	before := snapshot(t, root, skip...)
	m, err := Open(context.Background(), root, Options{LoopID: "L", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m.StartDetached(base)
	a := create(t, m, "A", 1)
	if !exists(a.Path, "b.txt") {
		t.Error("the attempt's worktree is not at the commit it was started at")
	}
	write(t, a.Path, "c.txt", "c\n")
	write(t, a.Path, ".claude/aot-loop-state.md", "the engine's\n")
	mr := finish(t, m, a, "c.txt")
	if mr.Commit == "" || mr.Conflict || !slices.Equal(mr.Changed, []string{"c.txt"}) {
		t.Fatalf("finish: %+v", mr)
	}
	if parent := run(t, root, "rev-parse", mr.Commit+"^"); parent != base {
		t.Errorf("the commit's parent is %s, want the start %s", parent, base)
	}
	if got := run(t, root, "rev-parse", "refs/heads/"+a.Branch); got != mr.Commit {
		t.Errorf("the attempt's branch is at %s, want its commit %s", got, mr.Commit)
	}
	if msg := run(t, root, "log", "-1", "--format=%B", mr.Commit); !strings.Contains(msg, "Aot-Loop: L\nAot-Atom: A\nAot-Attempt: 1") {
		t.Errorf("the commit's message has no trailers:\n%s", msg)
	}
	if out, _ := gitOut(root, "rev-parse", "--verify", "-q", "refs/heads/"+m.Branch()); out != "" {
		t.Errorf("a detached manager made the integration branch: %s", out)
	}
	if exists(m.WorktreesDir(), "integration") {
		t.Error("a detached manager made the integration worktree")
	}
	remove(t, m, a)
	if diff := cmp.Diff(before, snapshot(t, root, skip...)); diff != "" {
		t.Errorf("the person's files or repository state changed (-before +after):\n%s", diff)
	}
}
