package confine

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// git runs git in dir, failing the test on error.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestWritable: what an attempt may write, for a linked worktree (its
// admin folder and the repository's objects, refs and logs, not the rest of
// the repository's git folder), a plain repository seen from a subfolder
// (its .git), and a folder outside git; with the temp folder, the state
// file's real folder and the agent CLIs' folders from the environment.
func TestWritable(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(root, "repo")
	if err := os.MkdirAll(filepath.Join(repo, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q", "-b", "main")
	git(t, repo, "commit", "-q", "--allow-empty", "-m", "start")
	wt := filepath.Join(root, "wt")
	git(t, repo, "worktree", "add", "-q", "-b", "attempt", wt)
	plain := filepath.Join(root, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	// The state file through a link: its real folder is writable.
	stateDir := filepath.Join(repo, ".claude")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, "aot-loop-state.md"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "state.md")
	if err := os.Symlink(filepath.Join(stateDir, "aot-loop-state.md"), link); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": "/home/me", "TMPDIR": "/var/tmp/me", "CODEX_HOME": "/opt/codex"}
	getenv := func(k string) string { return env[k] }
	homes := []string{"/home/me/.claude", "/home/me/.claude.json", "/opt/codex", "/home/me/.gemini", "/home/me/.cache", "/home/me/.npm"}

	common := filepath.Join(repo, ".git")
	tests := []struct {
		name, workdir, stateFile string
		want                     []string
	}{
		{"worktree", wt, link, append([]string{wt, filepath.Join(common, "worktrees", "wt"),
			filepath.Join(common, "objects"), filepath.Join(common, "refs"), filepath.Join(common, "logs"),
			"/var/tmp/me", stateDir}, homes...)},
		{"subfolder of a repository", filepath.Join(repo, "sub"), "", append([]string{filepath.Join(repo, "sub"), common, "/var/tmp/me"}, homes...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Writable(tc.workdir, tc.stateFile, getenv)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Writable (-want +got):\n%s", diff)
			}
			if tc.name == "worktree" && slices.Contains(got, common) {
				t.Errorf("the whole git folder %s is writable from a worktree", common)
			}
		})
	}
	// Outside git nothing near the folder is writable but the folder (a
	// .git further up, in a folder above the test's, is git's business).
	got := Writable(plain, "", getenv)
	for _, p := range got {
		if strings.HasPrefix(p, root+string(filepath.Separator)) && p != plain {
			t.Errorf("outside git, %s is writable", p)
		}
	}
	if !slices.Contains(got, plain) || !slices.Contains(got, "/var/tmp/me") {
		t.Errorf("outside git: %q", got)
	}
}

// TestFor: the guard's command line, with the writable paths when it
// confines, without them when it does not; none without a guard.
func TestFor(t *testing.T) {
	var none *Guard
	if none.For("/w", "", nil) != nil {
		t.Fatal("a nil guard wraps nothing")
	}
	off := New(ModeOff, "/bin/aot")
	if off.Status.On || off.Status.Why != "turned off (--confine off)" {
		t.Fatalf("off: %+v", off.Status)
	}
	pg := off.For("/w", "", nil)
	if diff := cmp.Diff([]string{"aot", Command, "--"}, pg.Args); diff != "" || pg.Path != "/bin/aot" {
		t.Fatalf("off: path %s, args (-want +got):\n%s", pg.Path, diff)
	}
	on := &Guard{Exe: "/bin/aot", Status: Status{On: true}}
	pg = on.For("/w", "", []string{"HOME=/h", "TMPDIR=/t"})
	want := []string{"aot", Command, "--landlock", "--rw", "/w", "--rw", "/t"}
	if !slices.Equal(pg.Args[:len(want)], want) || pg.Args[len(pg.Args)-1] != "--" || !slices.Contains(pg.Args, "/h/.claude") {
		t.Fatalf("on: %q", pg.Args)
	}
	if on.WithoutLandlock().Status.On || on.WithoutLandlock().Exe != "/bin/aot" {
		t.Fatal("WithoutLandlock still confines")
	}
}

// TestParseArgs: the guard's arguments, and the mistakes it refuses.
func TestParseArgs(t *testing.T) {
	ll, rw, argv, err := parseArgs([]string{"--landlock", "--rw", "/a", "--rw", "/b c", "--", "/bin/sh", "-c", "echo --rw"})
	if err != nil || !ll || !slices.Equal(rw, []string{"/a", "/b c"}) || !slices.Equal(argv, []string{"/bin/sh", "-c", "echo --rw"}) {
		t.Fatalf("got %v %q %q %v", ll, rw, argv, err)
	}
	for _, bad := range [][]string{nil, {"--rw"}, {"--landlock"}, {"--"}, {"--what", "--", "x"}} {
		if _, _, _, err := parseArgs(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
