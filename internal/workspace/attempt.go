package workspace

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cleanupTimeout bounds the cleanup methods, which go on after their context
// is cancelled: a stopped or killed attempt must still leave nothing behind.
const cleanupTimeout = time.Minute

// lockReason marks the worktrees [Manager.Abandon] keeps.
const lockReason = "aot: kept failed attempt"

// Merge is what [Manager.Finish] did with an attempt's changes.
type Merge struct {
	// Changed are the files the attempt changed, relative to the project
	// folder, slash-separated, sorted: what its merge brought (the atom's
	// artifacts).
	Changed []string
	// RepoChanged are the same files relative to the repository's root, as
	// git names them, for a detached manager's attempt (its merge elsewhere
	// needs no git process to learn them); nil otherwise.
	RepoChanged []string
	// Commit is the integration branch's new commit; "" when nothing was
	// merged (no change, or a conflict). A detached manager's
	// ([Manager.StartDetached]) is the attempt's own commit.
	Commit string
	// Conflict: the changes were not merged, because git could not merge them
	// or because the integration branch changed one of the same files since
	// the attempt was created. The atom must be re-run on a new attempt.
	Conflict      bool
	ConflictFiles []string // relative to the project folder
	// Unclaimed are changed files the agent did not name; Missing are the
	// names it gave that changed nothing. A claimed folder covers the files
	// under it.
	Unclaimed, Missing []string
}

// Create makes a's worktree on a's branch at the integration branch's
// current commit, so it holds every merged change, and removes the engine's
// files from it.
func (m *Manager) Create(ctx context.Context, a Attempt) error {
	if !m.owns(a) {
		return fmt.Errorf("workspace: %s is not a worktree of loop %s", a.Path, m.loop)
	}
	return m.create(ctx, a)
}

// create adds a's worktree and branch at the integration branch's commit.
func (m *Manager) create(ctx context.Context, a Attempt) error {
	head, err := m.startedAt("Create")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(a.Path), 0o700); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	// -B: a branch of the same name can only be a leftover of a crashed run.
	// One add at a time: two git processes creating branches and worktrees
	// in one repository at once can fail on each other's locks.
	m.addMu.Lock()
	_, err = m.git(ctx, m.runDir(), "worktree", "add", "-q", "--lock", "--reason", m.inUse(), "-B", a.Branch, a.Path, head)
	m.addMu.Unlock()
	if err != nil {
		return fmt.Errorf("workspace: create %s: %w", a.Branch, err)
	}
	m.protect.removeFrom(a.Path)
	m.setBase(a.Branch, head)
	killPoint("create")
	return nil
}

// Finish commits everything the agent changed in a's worktree (never the
// engine's files) on a's branch, with message and trailers naming the loop,
// atom and attempt, then merges it into the integration branch as one
// ordinary commit on top of it. claimed are the artifacts the agent reported
// (relative to a.Dir, or absolute). When the attempt conflicts with what was
// merged since it was created, nothing is merged and Merge.Conflict is set.
func (m *Manager) Finish(ctx context.Context, a Attempt, message string, claimed []string) (Merge, error) {
	return m.FinishNoting(ctx, a, message, claimed, nil)
}

// FinishNoting is [Manager.Finish] that calls intent, when it is not nil,
// once the attempt is committed and before anything is merged, with the
// attempt's commit and the files it changed (relative to the project
// folder): the caller journals the merge's intent there, so that a run that
// dies during the merge can tell, resumed, whether it happened. When intent
// returns an error nothing is merged.
//
// An attempt whose worktree left its branch (another branch checked out, a
// detached HEAD, commits made on another branch) is not committed nor
// merged: the error is a *[LeftBranchError].
func (m *Manager) FinishNoting(ctx context.Context, a Attempt, message string, claimed []string, intent func(commit string, changed []string) error) (Merge, error) {
	if err := m.onBranch(ctx, a); err != nil {
		return Merge{}, err
	}
	m.mu.Lock()
	base, ok := m.bases[a.Branch]
	m.mu.Unlock()
	if !ok {
		return Merge{}, fmt.Errorf("workspace: finish %s: not created by this run", a.Branch)
	}
	message = commitMessage(message, m.loop, a)
	commit, changed, err := m.commit(ctx, a, base, message)
	if err != nil {
		return Merge{}, fmt.Errorf("workspace: finish %s: %w", a.Branch, err)
	}
	var mr Merge
	mr.Changed = m.projectPaths(changed)
	mr.Unclaimed, mr.Missing = compareClaims(mr.Changed, m.claims(a, claimed))
	if len(changed) == 0 {
		return mr, nil
	}
	if intent != nil {
		if err := intent(commit, mr.Changed); err != nil {
			return Merge{}, fmt.Errorf("workspace: finish %s: %w", a.Branch, err)
		}
	}
	killPoint("commit")

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.detached {
		mr.Commit, mr.RepoChanged = commit, changed // the caller merges it elsewhere
		return mr, nil
	}
	newHead := commit
	if m.head != base {
		since, err := m.changedSince(ctx, base)
		if err != nil {
			return Merge{}, fmt.Errorf("workspace: finish %s: %w", a.Branch, err)
		}
		if both := intersect(changed, since); len(both) > 0 {
			mr.Conflict, mr.ConflictFiles = true, m.projectPaths(both)
			return mr, nil
		}
		tree, conflicts, err := m.mergeTree(ctx, m.head, commit)
		if err != nil {
			return Merge{}, fmt.Errorf("workspace: finish %s: %w", a.Branch, err)
		}
		if conflicts != nil {
			mr.Conflict, mr.ConflictFiles = true, m.projectPaths(conflicts)
			return mr, nil
		}
		if newHead, err = m.line(ctx, m.intPath, "commit-tree", tree, "-p", m.head, "-m", message); err != nil {
			return Merge{}, fmt.Errorf("workspace: finish %s: %w", a.Branch, err)
		}
	}
	if err := m.advance(ctx, newHead); err != nil {
		return Merge{}, fmt.Errorf("workspace: finish %s: %w", a.Branch, err)
	}
	m.history = append(m.history, merged{head: newHead, changed: changed})
	mr.Commit = newHead
	killPoint("merge")
	return mr, nil
}

// commit stages and commits the worktree's changes on a's branch. It returns
// the commit (its only parent is base) and the repository-relative files it
// changed; no files when the agent changed nothing.
func (m *Manager) commit(ctx context.Context, a Attempt, base, message string) (string, []string, error) {
	add := append([]string{"add", "-A", "--", "."}, m.protect.excludes()...)
	if _, err := m.git(ctx, a.Path, add...); err != nil {
		return "", nil, err
	}
	if _, err := m.git(ctx, a.Path, "commit", "-q", "--allow-empty", "--no-verify", "--cleanup=verbatim", "-m", message); err != nil {
		return "", nil, err
	}
	// One process tells the commit, its parents and the files it changed.
	out, err := m.git(ctx, a.Path, "show", "-z", "--no-renames", "--name-only", "--format=%H %P", "HEAD")
	if err != nil {
		return "", nil, err
	}
	// Output: "COMMIT PARENTS\0\nFILE\0FILE\0...".
	fields := splitZ(out)
	var commit string
	var parents, changed []string
	if len(fields) > 0 {
		if ids := strings.Fields(fields[0]); len(ids) > 0 {
			commit, parents = ids[0], ids[1:]
		}
		for _, f := range fields[1:] {
			if f = strings.TrimPrefix(f, "\n"); f != "" {
				changed = append(changed, f)
			}
		}
	}
	if commit == "" || !slices.Equal(parents, []string{base}) || slices.ContainsFunc(changed, m.protect.match) {
		// The agent committed, moved HEAD or staged the engine's files
		// itself: squash the worktree into one commit on base instead.
		return m.squash(ctx, a, base, message)
	}
	return commit, changed, nil
}

// squash commits the worktree's tree as one commit on base, without the
// engine's files.
func (m *Manager) squash(ctx context.Context, a Attempt, base, message string) (string, []string, error) {
	if m.protect.state != "" {
		// Put the engine's files back in the index as they were at base.
		reset := []string{"reset", "-q", base, "--", m.protect.state, m.protect.dir}
		if _, err := m.git(ctx, a.Path, reset...); err != nil {
			return "", nil, err
		}
	}
	tree, err := m.line(ctx, a.Path, "write-tree")
	if err != nil {
		return "", nil, err
	}
	commit, err := m.line(ctx, a.Path, "commit-tree", tree, "-p", base, "-m", message)
	if err != nil {
		return "", nil, err
	}
	if _, err := m.git(ctx, a.Path, "update-ref", "refs/heads/"+a.Branch, commit); err != nil {
		return "", nil, err
	}
	out, err := m.git(ctx, a.Path, "diff-tree", "-r", "-z", "--no-renames", "--name-only", base, commit)
	if err != nil {
		return "", nil, err
	}
	changed := slices.DeleteFunc(splitZ(out), m.protect.match)
	return commit, changed, nil
}

// changedSince lists the files the integration branch changed since base:
// from the merges of this run when base is one of its heads, else from git.
func (m *Manager) changedSince(ctx context.Context, base string) ([]string, error) {
	from := -1
	if base == m.runStart {
		from = 0
	}
	for i, h := range m.history {
		if h.head == base {
			from = i + 1
		}
	}
	if from >= 0 {
		var files []string
		for _, h := range m.history[from:] {
			files = append(files, h.changed...)
		}
		return files, nil
	}
	out, err := m.git(ctx, m.intPath, "diff-tree", "-r", "-z", "--no-renames", "--name-only", base, m.head)
	if err != nil {
		return nil, err
	}
	return splitZ(out), nil
}

// mergeTree merges commit into head without a worktree. It returns the
// merged tree, or the conflicting files.
func (m *Manager) mergeTree(ctx context.Context, head, commit string) (string, []string, error) {
	out, err := m.git(ctx, m.intPath, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", head, commit)
	parts := strings.Split(string(out), "\x00")
	if err != nil {
		if exitCode(err) != 1 {
			return "", nil, err
		}
		var files []string
		for _, p := range parts[1:] {
			if p == "" {
				break
			}
			if !slices.Contains(files, p) {
				files = append(files, p)
			}
		}
		if files == nil {
			files = []string{}
		}
		return "", files, nil
	}
	return strings.TrimSpace(parts[0]), nil, nil
}

// advance moves the integration branch to commit, a descendant of the
// current head, then its worktree. The branch moves first, and only from the
// head this manager knows: the commit is reachable from a ref of the loop
// before anything else happens (a git gc --prune=now beside the loop cannot
// remove it), and a branch someone else moved is never overwritten.
func (m *Manager) advance(ctx context.Context, commit string) error {
	if _, err := m.git(ctx, m.intPath, "update-ref", "-m", "aot: merge", "refs/heads/"+m.intBranch, commit, m.head); err != nil {
		return err
	}
	m.head = commit
	// The integration worktree is only ever read: it follows the branch,
	// whatever was left in it.
	if _, err := m.git(ctx, m.intPath, "reset", "-q", "--hard", commit); err != nil {
		return err
	}
	m.protect.removeFrom(m.intPath)
	return nil
}

// Remove deletes a's worktree and branch, whatever state they are in (also
// a kept one, or one that was never fully created). It goes on when ctx is
// already cancelled, bounded by a minute.
func (m *Manager) Remove(ctx context.Context, a Attempt) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if !m.owns(a) {
		return fmt.Errorf("workspace: %s is not a worktree of loop %s", a.Path, m.loop)
	}
	dir := m.runDir()
	// The branch and the worktree are independent: remove both at once.
	refErr := make(chan error, 1)
	go func() {
		_, err := m.git(ctx, dir, "update-ref", "-d", "refs/heads/"+a.Branch)
		refErr <- err
	}()
	err := m.removeWorktree(ctx, dir, a.Path)
	if e := <-refErr; e != nil && err == nil {
		err = e
	}
	m.setBase(a.Branch, "")
	if err != nil {
		return fmt.Errorf("workspace: remove %s: %w", a.Branch, err)
	}
	return nil
}

// Abandon ends a failed, killed, stopped or redirected attempt: with
// KeepFailed its worktree and branch stay, locked so that nothing removes
// them by accident and listed by [Manager.Kept]; otherwise it is [Manager.Remove].
func (m *Manager) Abandon(ctx context.Context, a Attempt) (kept bool, err error) {
	if !m.keepFailed {
		return false, m.Remove(ctx, a)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := os.Stat(filepath.Join(a.Path, ".git")); err != nil {
		return false, m.Remove(ctx, a)
	}
	reason := lockReason + " " + a.Atom + " #" + strconv.Itoa(a.Number)
	// The worktree is locked while in use: its lock now says why it stays.
	m.git(ctx, m.runDir(), "worktree", "unlock", a.Path)
	if _, err := m.git(ctx, m.runDir(), "worktree", "lock", "--reason", reason, a.Path); err != nil {
		return false, fmt.Errorf("workspace: keep %s: %w", a.Branch, err)
	}
	m.setBase(a.Branch, "")
	return true, nil
}

// removeWorktree removes the worktree at p, registered or not, with its
// folder present, half-made or gone. Only p's registration is touched,
// never another worktree's (no git worktree prune).
func (m *Manager) removeWorktree(ctx context.Context, dir, p string) error {
	if _, err := m.git(ctx, dir, "worktree", "remove", "--force", "--force", p); err == nil {
		return nil
	}
	if err := os.RemoveAll(p); err != nil {
		return err
	}
	// With its folder gone git drops a registration; "not a working tree"
	// means there was none.
	m.git(ctx, dir, "worktree", "remove", "--force", "--force", p)
	return nil
}

// owns reports whether a names a worktree of this loop.
func (m *Manager) owns(a Attempt) bool {
	return filepath.Dir(a.Path) == m.loopDir && a.Path != m.intPath &&
		strings.HasPrefix(a.Branch, m.attemptRef) && len(a.Branch) > len(m.attemptRef)
}

// CommitMessage is message with the trailers that name the loop, atom and
// attempt of a commit, as the local engine's commits carry them.
func CommitMessage(message, loop, atom string, attempt int) string {
	return commitMessage(message, loop, Attempt{Atom: atom, Number: attempt})
}

// commitMessage is message with trailers naming the loop, atom and attempt.
func commitMessage(message, loop string, a Attempt) string {
	message = strings.TrimSpace(message)
	if message == "" {
		message = "aot: atom " + a.Atom
	}
	return fmt.Sprintf("%s\n\nAot-Loop: %s\nAot-Atom: %s\nAot-Attempt: %d\n", message, loop, a.Atom, a.Number)
}

// projectPaths makes repository-relative paths relative to the project
// folder.
func (m *Manager) projectPaths(files []string) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		if m.rel != "" {
			if strings.HasPrefix(f, m.rel+"/") {
				f = strings.TrimPrefix(f, m.rel+"/")
			} else {
				f = strings.Repeat("../", strings.Count(m.rel, "/")+1) + f
			}
		}
		out = append(out, f)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// claims normalizes the agent's artifacts to project-relative paths.
func (m *Manager) claims(a Attempt, claimed []string) []string {
	var out []string
	for _, c := range claimed {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if filepath.IsAbs(c) {
			for _, dir := range []string{a.Dir, m.inProject(m.root)} {
				if r, err := filepath.Rel(dir, c); err == nil && !strings.HasPrefix(r, "..") {
					c = r
					break
				}
			}
		}
		out = append(out, path.Clean(filepath.ToSlash(c)))
	}
	return out
}

// compareClaims returns the changed files no claim covers, and the claims
// that cover no changed file.
func compareClaims(changed, claimed []string) (unclaimed, missing []string) {
	covers := func(c, f string) bool { return c == "." || f == c || strings.HasPrefix(f, c+"/") }
	for _, f := range changed {
		if !slices.ContainsFunc(claimed, func(c string) bool { return covers(c, f) }) {
			unclaimed = append(unclaimed, f)
		}
	}
	for _, c := range claimed {
		if !slices.ContainsFunc(changed, func(f string) bool { return covers(c, f) }) && !slices.Contains(missing, c) {
			missing = append(missing, c)
		}
	}
	return unclaimed, missing
}

// intersect returns the elements of a that are in b, sorted.
func intersect(a, b []string) []string {
	set := make(map[string]bool, len(b))
	for _, x := range b {
		set[x] = true
	}
	var out []string
	for _, x := range a {
		if set[x] {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
