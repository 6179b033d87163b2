package workspace

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// remoteTestGit runs git in dir for the tests of remote.go.
func remoteTestGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=P", "-c", "user.email=p@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(dir, "no-gitconfig"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// A push never overwrites a ref that is not where its update expects it,
// and an atomic push of several updates makes all of them or none.
func TestPushHoldsItsLeases(t *testing.T) {
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote.git")
	remoteTestGit(t, dir, "init", "-q", "--bare", remote)
	work := filepath.Join(dir, "work")
	remoteTestGit(t, dir, "init", "-q", work)
	remoteTestGit(t, work, "commit", "-q", "--allow-empty", "-m", "one")
	one := remoteTestGit(t, work, "rev-parse", "HEAD")
	remoteTestGit(t, work, "commit", "-q", "--allow-empty", "-m", "two")
	two := remoteTestGit(t, work, "rev-parse", "HEAD")
	ctx := context.Background()
	at := func(branch string) string {
		out, _ := exec.Command("git", "-C", remote, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Output()
		return strings.TrimSpace(string(out))
	}

	// Created where there is none; refused where there is one.
	if err := Push(ctx, work, remote, RemoteUpdate{Ref: "refs/heads/aot/x/integration", Commit: one}); err != nil {
		t.Fatal(err)
	}
	if err := Push(ctx, work, remote, RemoteUpdate{Ref: "refs/heads/aot/x/integration", Commit: two}); err == nil || at("aot/x/integration") != one {
		t.Errorf("a creation over an existing branch: %v; the branch is at %s", err, at("aot/x/integration"))
	}
	// Moved only from where it is expected.
	if err := Push(ctx, work, remote, RemoteUpdate{Ref: "refs/heads/aot/x/integration", Commit: two, Expect: two}); err == nil || at("aot/x/integration") != one {
		t.Errorf("an update with a stale lease: %v; the branch is at %s", err, at("aot/x/integration"))
	}
	// Together or not at all: the second update's lease fails.
	if err := Push(ctx, work, remote, RemoteUpdate{Ref: "refs/heads/aot/x/A-1", Commit: one}); err != nil {
		t.Fatal(err)
	}
	err := Push(ctx, work, remote,
		RemoteUpdate{Ref: "refs/heads/aot/x/integration", Commit: two, Expect: one},
		RemoteUpdate{Ref: "refs/heads/aot/x/A-1", Expect: two})
	if err == nil || at("aot/x/integration") != one || at("aot/x/A-1") != one {
		t.Errorf("a push with one failing lease: %v; integration at %s, A-1 at %s", err, at("aot/x/integration"), at("aot/x/A-1"))
	}
	err = Push(ctx, work, remote,
		RemoteUpdate{Ref: "refs/heads/aot/x/integration", Commit: two, Expect: one},
		RemoteUpdate{Ref: "refs/heads/aot/x/A-1", Expect: one})
	if err != nil || at("aot/x/integration") != two || at("aot/x/A-1") != "" {
		t.Errorf("a push whose leases hold: %v; integration at %s, A-1 at %q", err, at("aot/x/integration"), at("aot/x/A-1"))
	}
	branches, err := RemoteBranches(ctx, work, remote, "aot/x/")
	if err != nil || len(branches) != 1 || branches["aot/x/integration"] != two {
		t.Errorf("RemoteBranches: %v %v", branches, err)
	}
	if err := Push(ctx, work, remote, RemoteUpdate{Ref: "main", Commit: one}); err == nil {
		t.Error("a short ref name was pushed")
	}
}
