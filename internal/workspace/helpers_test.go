package workspace

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestMain makes every git process hermetic: no system or global config.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "workspace-home")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("HOME", home)
	os.Setenv("XDG_CONFIG_HOME", home)
	os.Unsetenv("XDG_CACHE_HOME") // the worktrees go below HOME
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Unsetenv("GIT_CONFIG_GLOBAL")
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

// run runs git in dir as the person would, and returns its trimmed output.
func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitOut(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=Person", "-c", "user.email=p@example.com"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// newRepo makes a repository on branch main with files committed.
func newRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "project")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, root, "init", "-q", "-b", "main")
	for name, content := range files {
		write(t, root, name, content)
	}
	run(t, root, "add", "-A")
	run(t, root, "commit", "-q", "-m", "initial")
	return root
}

func write(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t testing.TB, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func exists(dir, name string) bool {
	_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name)))
	return err == nil
}

// start opens and starts a manager on root.
func start(t testing.TB, root string, o Options) *Manager {
	t.Helper()
	m, err := Open(context.Background(), root, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

// create plans and creates an attempt.
func create(t testing.TB, m *Manager, atom string, n int) Attempt {
	t.Helper()
	a := m.Plan(atom, n)
	if err := m.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func finish(t testing.TB, m *Manager, a Attempt, claimed ...string) Merge {
	t.Helper()
	mr, err := m.Finish(context.Background(), a, a.Atom+": do "+a.Atom, claimed)
	if err != nil {
		t.Fatal(err)
	}
	return mr
}

func remove(t testing.TB, m *Manager, a Attempt) {
	t.Helper()
	if err := m.Remove(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// snapshot is every file under dir (the .git folder's index and refs
// included), for byte-for-byte comparisons.
func snapshot(t testing.TB, dir string, skip ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// worktreeList is the paths of git worktree list.
func worktreeList(t testing.TB, root string) []string {
	t.Helper()
	var paths []string
	for _, line := range strings.Split(run(t, root, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	return paths
}
