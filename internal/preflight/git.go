package preflight

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aot-loop/aot/internal/workspace"
)

const worktreeFix = "choose a folder this user may write with --worktree-dir DIR or AOT_WORKTREE_DIR"

// Git checks what isolated attempts need: git on PATH and at least 2.38,
// root inside a repository with a commit, and a worktree made (and removed
// again) in dir, the attempts' worktree folder ("" for the default one in
// the user cache folder). Without a repository only dir is checked.
func Git(ctx context.Context, root, dir string, env Env) []Check {
	path, err := env.lookPath("git")
	if err != nil {
		out := []Check{fail("git", "git is not found on PATH: attempts cannot get worktrees of their own, and workers run one at a time in the project root",
			"install git 2.38 or later and put it on PATH")}
		if dir != "" {
			out = append(out, Writable("worktrees", dir, worktreeFix))
		}
		return out
	}
	var out []Check
	v, err := workspace.Git(ctx, root, "version")
	switch {
	case err != nil:
		return []Check{fail("git", fmt.Sprintf("%s does not run: %v", path, err), "reinstall git")}
	case !workspace.GitSupported(string(v)):
		out = append(out, warn("git", firstLine(string(v))+" at "+path+": isolated attempts need 2.38 or later (merge-tree --write-tree), so workers run one at a time", "install git 2.38 or later"))
	default:
		out = append(out, ok("git", firstLine(string(v))+" at "+path))
	}
	top, err := workspace.Git(ctx, root, "rev-parse", "--path-format=absolute", "--show-toplevel")
	if err != nil {
		out = append(out, warn("repository", root+" is not in a git repository: workers run one at a time in it, without worktrees",
			"git init, then commit, to run them in parallel, each in its own worktree"))
		if dir != "" {
			out = append(out, Writable("worktrees", dir, worktreeFix))
		}
		return out
	}
	if _, err := workspace.Git(ctx, root, "rev-parse", "--verify", "-q", "HEAD^{commit}"); err != nil {
		out = append(out, warn("repository", strings.TrimSpace(string(top))+" has no commit yet: workers run one at a time, without worktrees",
			"commit once (git add -A && git commit -m start) to run them in parallel"))
		if dir != "" {
			out = append(out, Writable("worktrees", dir, worktreeFix))
		}
		return out
	}
	out = append(out, ok("repository", strings.TrimSpace(string(top))))
	if dir == "" {
		common, err := workspace.Git(ctx, root, "rev-parse", "--path-format=absolute", "--git-common-dir")
		if err != nil {
			return append(out, fail("worktrees", fmt.Sprintf("git cannot name the repository's folder: %v", err), "repair the repository (git fsck)"))
		}
		dir = workspace.DefaultDir(strings.TrimSpace(string(common)))
	}
	return append(out, worktree(ctx, root, dir))
}

// worktree makes a throwaway worktree in dir (or the nearest folder above
// it that exists) and removes it.
func worktree(ctx context.Context, root, dir string) Check {
	tmp, err := tempIn(dir)
	if err != nil {
		return fail("worktrees", err.Error(), worktreeFix)
	}
	defer os.RemoveAll(tmp)
	wt := filepath.Join(tmp, "wt")
	if _, err := workspace.Git(ctx, root, "worktree", "add", "--detach", "--no-checkout", wt, "HEAD"); err != nil {
		return fail("worktrees", fmt.Sprintf("git cannot make a worktree in %s: %v", dir, err), worktreeFix)
	}
	if _, err := workspace.Git(ctx, root, "worktree", "remove", "--force", wt); err != nil {
		_, _ = workspace.Git(ctx, root, "worktree", "prune")
	}
	return ok("worktrees", dir+": a worktree can be made there")
}

// Writable checks that files can be made in dir (or, when it does not
// exist yet, in the nearest folder above it, where it would be made).
func Writable(name, dir, fix string) Check {
	tmp, err := tempIn(dir)
	if err != nil {
		return fail(name, err.Error(), fix)
	}
	os.RemoveAll(tmp)
	return ok(name, dir+" is writable")
}

// tempIn makes a temporary folder in dir or the nearest existing folder
// above it.
func tempIn(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	at := abs
	for {
		fi, err := os.Stat(at)
		if err == nil {
			if !fi.IsDir() {
				return "", fmt.Errorf("%s cannot be made: %s is a file, not a folder", abs, at)
			}
			break
		}
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", fmt.Errorf("%s: %v", abs, err)
		}
		parent := filepath.Dir(at)
		if parent == at {
			return "", fmt.Errorf("%s: no folder above it exists", abs)
		}
		at = parent
	}
	tmp, err := os.MkdirTemp(at, ".aot-doctor-")
	if err != nil {
		if at != abs {
			return "", fmt.Errorf("%s cannot be made: %s is not writable (%v)", abs, at, errors.Unwrap(err))
		}
		return "", fmt.Errorf("%s is not writable (%v)", abs, errors.Unwrap(err))
	}
	return tmp, nil
}
