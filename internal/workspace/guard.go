package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The rules that keep the loop's git work to what the loop owns: an attempt
// is taken only from its own branch, a merge is found again after a crash
// instead of being made twice, and a test can kill aot at each step of an
// attempt's life.

// LeftBranchError is an attempt whose worktree no longer has its branch
// checked out, or that committed on another branch: nothing of it is
// committed nor merged, and its commits elsewhere are reported, not taken.
type LeftBranchError struct {
	Branch    string   // the attempt's branch
	Head      string   // what the worktree has checked out now: a branch, or "a detached HEAD at <commit>"
	Elsewhere []string // "<commit> <subject>" of the commits it made outside its branch
}

func (e *LeftBranchError) Error() string {
	msg := "the agent left the attempt's branch " + e.Branch
	if e.Head != "" {
		msg += " (its worktree is on " + e.Head + ")"
	}
	if len(e.Elsewhere) > 0 {
		msg += "; its commits outside that branch, not taken: " + strings.Join(e.Elsewhere, "; ")
	}
	return msg
}

// onBranch checks that a's worktree still has a's branch checked out and
// that every commit made in it is on that branch.
func (m *Manager) onBranch(ctx context.Context, a Attempt) error {
	want := "refs/heads/" + a.Branch
	e := &LeftBranchError{Branch: a.Branch}
	ref, err := m.line(ctx, a.Path, "symbolic-ref", "-q", "HEAD")
	if err != nil && exitCode(err) != 1 {
		return fmt.Errorf("workspace: finish %s: %w", a.Branch, err)
	}
	switch {
	case ref == "":
		head, _ := m.line(ctx, a.Path, "rev-parse", "--short=12", "HEAD")
		e.Head = "a detached HEAD at " + head
	case ref != want:
		e.Head = strings.TrimPrefix(ref, "refs/heads/")
	}
	// The worktree's own HEAD log lists every commit made in it, on
	// whichever branch.
	out, err := m.git(ctx, a.Path, "log", "-g", "-z", "--format=%H %gs", "HEAD")
	if err != nil {
		return fmt.Errorf("workspace: finish %s: %w", a.Branch, err)
	}
	seen := map[string]bool{}
	for _, entry := range splitZ(out) {
		id, subject, _ := strings.Cut(entry, " ")
		if !strings.HasPrefix(subject, "commit") || seen[id] {
			continue
		}
		seen[id] = true
		if _, err := m.git(ctx, a.Path, "merge-base", "--is-ancestor", id, want); err == nil {
			continue
		}
		msg, _ := m.line(ctx, a.Path, "log", "-1", "--format=%s", id)
		e.Elsewhere = append(e.Elsewhere, fmt.Sprintf("%.12s %s", id, msg))
	}
	if e.Head == "" && len(e.Elsewhere) == 0 {
		return nil
	}
	return e
}

// inUse is the lock reason of a worktree the loop is using.
func (m *Manager) inUse() string { return "aot: in use by loop " + m.loop }

// MergedAttempt is an attempt whose merge is on the integration branch.
type MergedAttempt struct {
	Atom    string
	Number  int    // the attempt's number, as [Manager.Plan] was given it
	Commit  string // the commit on the integration branch that carries it
	Changed []string
}

// Merged lists the attempts of this loop merged into the integration branch
// since the loop started, oldest first, found by their commits' Aot-Loop,
// Aot-Atom and Aot-Attempt trailers: what a resumed run adopts instead of
// merging again. Call it after [Manager.Start].
func (m *Manager) Merged(ctx context.Context) ([]MergedAttempt, error) {
	m.mu.Lock()
	from, head, started := m.start.Head, m.head, m.started
	m.mu.Unlock()
	if !started {
		return nil, fmt.Errorf("workspace: Merged before Start")
	}
	format := "--format=%H%x1f%(trailers:key=Aot-Loop,valueonly,separator=%x1e)%x1f" +
		"%(trailers:key=Aot-Atom,valueonly,separator=%x1e)%x1f%(trailers:key=Aot-Attempt,valueonly,separator=%x1e)"
	out, err := m.git(ctx, m.intPath, "log", "-z", "--reverse", format, from+".."+head)
	if err != nil {
		return nil, fmt.Errorf("workspace: merged: %w", err)
	}
	var list []MergedAttempt
	for _, rec := range splitZ(out) {
		f := strings.Split(strings.TrimPrefix(rec, "\n"), "\x1f")
		if len(f) != 4 || strings.TrimSpace(f[1]) != m.loop {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f[3]))
		if err != nil {
			continue
		}
		changed, err := m.git(ctx, m.intPath, "diff-tree", "-r", "-z", "--no-renames", "--name-only", f[0]+"^", f[0])
		if err != nil {
			return nil, fmt.Errorf("workspace: merged: %w", err)
		}
		list = append(list, MergedAttempt{Atom: strings.TrimSpace(f[2]), Number: n, Commit: f[0], Changed: m.projectPaths(splitZ(changed))})
	}
	return list, nil
}

// killPoint kills this process with SIGKILL when AOT_TEST_KILL_AT names
// step (create, commit, merge, land): the crash tests' way to stop aot at
// each step of an attempt's life, as a power cut or kill -9 would.
func killPoint(step string) {
	if os.Getenv("AOT_TEST_KILL_AT") != step {
		return
	}
	if marker := os.Getenv("AOT_TEST_KILL_MARKER"); marker != "" {
		// Once only: the resumed run goes on.
		if _, err := os.Stat(marker); err == nil {
			return
		}
		os.MkdirAll(filepath.Dir(marker), 0o755)
		os.WriteFile(marker, []byte(step+"\n"), 0o644)
	}
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Kill() // SIGKILL
	}
}
