package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/aot-loop/aot/internal/proc"
)

// Identity of the loop's commits, so that committing never depends on the
// person's user.name and user.email.
const (
	authorName  = "aot loop"
	authorEmail = "aot-loop@localhost"
)

// safety is passed as -c to every git process: no hook of the repository or
// of the person runs, no commit asks for a signature or a passphrase, and no
// automatic gc or maintenance starts in the middle of a loop.
var safety = []string{
	"-c", "core.hooksPath=" + os.DevNull,
	"-c", "commit.gpgSign=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "core.fsmonitor=false",
	"-c", "advice.detachedHead=false",
	"-c", "init.defaultBranch=main",
}

// locating lists the variables that would point git at another repository,
// index or worktree than the directory it is run in (they are set, for
// instance, when aot runs inside a git hook).
var locating = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true, "GIT_OBJECT_DIRECTORY": true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_COMMON_DIR": true, "GIT_NAMESPACE": true,
	"GIT_PREFIX": true, "GIT_QUARANTINE_PATH": true, "GIT_INDEX_VERSION": true,
	"GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true, "GIT_AUTHOR_DATE": true,
	"GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true, "GIT_COMMITTER_DATE": true,
}

// gitEnv is the environment of every git process: the caller's, without the
// variables that relocate git, with the loop's identity and no prompts.
func gitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !locating[strings.ToUpper(name)] {
			env = append(env, kv)
		}
	}
	return append(env,
		"GIT_AUTHOR_NAME="+authorName, "GIT_AUTHOR_EMAIL="+authorEmail,
		"GIT_COMMITTER_NAME="+authorName, "GIT_COMMITTER_EMAIL="+authorEmail,
		"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0",
	)
}

// GitError is a git command that failed: its arguments, the directory it ran
// in, its exit code and what it printed on stderr.
type GitError struct {
	Args   []string
	Dir    string
	Code   int // -1 when git did not run or was killed
	Stderr string
	Err    error
}

func (e *GitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s (in %s): %s", strings.Join(e.Args, " "), e.Dir, msg)
}

func (e *GitError) Unwrap() error { return e.Err }

// exitCode is the exit code of a failed git command, -1 if it is not one.
func exitCode(err error) int {
	var ge *GitError
	if errors.As(err, &ge) {
		return ge.Code
	}
	return -1
}

// git runs git with args in dir and returns its standard output. The
// process runs in its own group, killed as a whole when ctx is done.
func (m *Manager) git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return runGit(ctx, m.env, dir, args...)
}

// Git runs git in dir as a Manager does (the loop's identity, no hooks, no
// prompts, killed with ctx), for git work outside a Manager: the clones of
// the Temporal workers. A failure is a *GitError.
func Git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return runGit(ctx, gitEnv(), dir, args...)
}

func runGit(ctx context.Context, env []string, dir string, args ...string) ([]byte, error) {
	full := append(append([]string{}, safety...), args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	proc.Group(cmd)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			code = ee.ExitCode()
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return stdout.Bytes(), &GitError{Args: args, Dir: dir, Code: code, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// line runs git and returns its output's first line.
func (m *Manager) line(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := m.git(ctx, dir, args...)
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first), err
}

// path runs git and returns its output, a path, without the one newline
// git ends it with: a path may itself end with or hold newlines.
func (m *Manager) path(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := m.git(ctx, dir, args...)
	if err != nil {
		return "", err
	}
	p := strings.TrimSuffix(string(out), "\n")
	if p == "" {
		return "", &GitError{Args: args, Dir: dir, Code: -1, Err: errors.New("no path in git's output")}
	}
	return p, nil
}

// splitZ splits NUL-terminated output.
func splitZ(out []byte) []string {
	var parts []string
	for _, p := range bytes.Split(out, []byte{0}) {
		if len(p) > 0 {
			parts = append(parts, string(p))
		}
	}
	return parts
}
