package workspace

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// benchRepo makes a repository of n files of about 100 bytes, 100 per
// folder, in one commit.
func benchRepo(b *testing.B, n int) string {
	b.Helper()
	root := filepath.Join(b.TempDir(), "project")
	run(b, b.TempDir(), "init", "-q", "-b", "main", root)
	line := "// a line of source code, long enough to look like one\n"
	for i := range n {
		name := filepath.Join(root, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d.go", i))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(name, []byte(line+line), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	run(b, root, "add", "-A")
	run(b, root, "commit", "-q", "-m", "files")
	return root
}

// BenchmarkIsolation is the isolation overhead of one atom: create its
// worktree, commit one changed file, merge it into the integration branch,
// remove the worktree and branch.
func BenchmarkIsolation(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			root := benchRepo(b, n)
			m := start(b, root, Options{LoopID: "bench"})
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				a := m.Plan("A", i)
				if err := m.Create(ctx, a); err != nil {
					b.Fatal(err)
				}
				name := filepath.Join(a.Dir, "d000", "f00000.go")
				if err := os.WriteFile(name, []byte(fmt.Sprintf("// version %d\n", i)), 0o644); err != nil {
					b.Fatal(err)
				}
				mr, err := m.Finish(ctx, a, "bench", nil)
				if err != nil || mr.Commit == "" {
					b.Fatal(mr, err)
				}
				if err := m.Remove(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGitWorktreeFloor is git's own floor on the same repositories:
// git worktree add (detached, at HEAD) and git worktree remove.
func BenchmarkGitWorktreeFloor(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			root := benchRepo(b, n)
			wt := filepath.Join(b.TempDir(), "wt")
			git := func(args ...string) {
				cmd := exec.Command("git", args...)
				cmd.Dir = root
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			for b.Loop() {
				git("worktree", "add", "-q", wt, "HEAD")
				git("worktree", "remove", wt)
			}
		})
	}
}
