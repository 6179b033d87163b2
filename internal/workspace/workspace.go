// Package workspace isolates parallel agent attempts with git: each attempt
// works in its own worktree on its own branch, created from the integration
// branch aot/<loop>; a finished attempt is committed and merged into that
// branch (or reported as a conflict, merging nothing), and at the end of a run
// the integration branch is landed on the branch the run started from.
//
// The person's working tree, index and branch are never written, except by
// [Manager.Land], which fast-forwards their branch only when their working
// tree is clean. The state file and its aot-loop folder belong to the engine:
// they are removed from every checkout this package makes and never
// committed.
//
// Lifecycle, as the engine drives it:
//
//	m, err := workspace.Open(ctx, root, opts) // errors.Is(err, ErrNotGit): run without isolation
//	m.CleanOrphans(ctx, keep)                // worktrees and branches a crashed run left
//	journal(m.IntegrationDir(), m.Branch()); m.Start(ctx)
//	a := m.Plan(atom, n); journal(a); m.Create(ctx, a)
//	... the agent runs in a.Dir ...
//	mr, err := m.Finish(ctx, a, msg, artifacts) // mr.Conflict: re-run the atom on a new attempt
//	m.Remove(ctx, a)                            // or m.Abandon(ctx, a) for a failed attempt
//	landing, err := m.Land(ctx)
//
// All methods are safe for concurrent use; merges into the integration branch
// are serialized.
package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrNotGit is returned by [Open] when isolation is not available: the
// project is not inside a git working tree, the repository has no commit yet,
// or git is older than 2.38. The caller runs without isolation.
var ErrNotGit = errors.New("no git isolation")

// Options configure a [Manager].
type Options struct {
	// LoopID names the loop: the integration branch is aot/<LoopID>, attempt
	// branches aot-attempt/<LoopID>/<atom>-<n>. Default "loop". Characters
	// outside [A-Za-z0-9._-] are replaced (with a hash suffix, so that two IDs
	// never share a name).
	LoopID string
	// KeepFailed makes [Manager.Abandon] keep a failed attempt's worktree and
	// branch (locked, listed by [Manager.Kept]) instead of removing them.
	KeepFailed bool
	// Dir is where worktrees live, one folder per loop. Default
	// [DefaultDir]: outside the repository's .git folder, where agents
	// refuse to write (Claude Code holds every file below .git/ sensitive).
	Dir string
	// StateFile is the engine's state file; it, files beside it that start
	// with its name (lock, rejected copies) and the aot-loop folder beside it
	// are never committed nor left in a checkout. Default
	// <projectRoot>/.claude/aot-loop-state.md.
	StateFile string
}

// Attempt names one worker attempt's worktree and branch. [Manager.Plan]
// decides the names before anything exists, so the engine can journal them
// first.
type Attempt struct {
	Atom   string // the atom's ID (for orphans: recovered from the name, with unusual characters replaced)
	Number int    // the attempt number
	Path   string // the worktree's root
	Dir    string // where the agent runs: the project's folder inside the worktree
	Branch string // the attempt's branch, without refs/heads/
}

// Manager does the git work of one loop in one repository.
type Manager struct {
	env        []string
	root       string // the person's working tree (top level), symbolic links resolved
	rel        string // the project's folder inside it, slash-separated, "" at the top
	common     string // the git common directory
	loop       string
	loopDir    string // worktrees of this loop
	intPath    string // the integration worktree
	intBranch  string
	attemptRef string // prefix of attempt branches
	metaPath   string
	keepFailed bool
	protect    protected

	mu       sync.Mutex
	addMu    sync.Mutex // serializes git worktree add
	started  bool
	detached bool // StartDetached: no integration worktree, Finish merges nothing
	start    startPoint
	head     string            // the integration branch's commit
	runStart string            // its commit when this run started
	bases    map[string]string // attempt branch -> the commit it was created at
	history  []merged          // merges of this run, oldest first
}

// startPoint is where the run started, kept beside the worktrees so that a
// resumed run lands on the same branch.
type startPoint struct {
	Branch string `json:"branch"` // full ref name, "" when HEAD was detached
	Head   string `json:"head"`
}

// merged is one commit this manager put on the integration branch, and the
// files it changed (repository-relative).
type merged struct {
	head    string
	changed []string
}

// Open inspects the repository holding projectRoot (which may be a folder
// inside it); it writes nothing. It returns an error wrapping [ErrNotGit]
// when isolation is not available there.
func Open(ctx context.Context, projectRoot string, o Options) (*Manager, error) {
	m := &Manager{env: gitEnv(), keepFailed: o.KeepFailed, bases: map[string]string{}}
	abs, err := filepath.Abs(projectRoot)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	// One path per git process: a path may hold any character but NUL, a
	// newline included, so two of them in one output cannot be told apart.
	top, err := m.path(ctx, abs, "rev-parse", "--path-format=absolute", "--show-toplevel")
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("workspace: %w", ctx.Err())
		}
		return nil, fmt.Errorf("workspace: %s: %w", abs, ErrNotGit)
	}
	// From here on the project is in a git working tree: a failure is an
	// error, never a reason to run without isolation.
	common, err := m.path(ctx, abs, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	m.root, m.common = realPath(top), realPath(common)
	if v := m.gitVersion(ctx, abs); !versionAtLeast(v, 2, 38) {
		return nil, fmt.Errorf("workspace: %s, need git 2.38 or later (merge-tree --write-tree): %w", v, ErrNotGit)
	}
	if _, err := m.git(ctx, abs, "rev-parse", "--verify", "-q", "HEAD^{commit}"); err != nil {
		return nil, fmt.Errorf("workspace: %s has no commit yet: %w", m.root, ErrNotGit)
	}
	rel, err := filepath.Rel(m.root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("workspace: %s is not inside %s", abs, m.root)
	}
	if rel = filepath.ToSlash(rel); rel != "." {
		m.rel = rel
	}

	m.loop = "loop"
	if o.LoopID != "" {
		m.loop = slug(o.LoopID)
	}
	dir := o.Dir
	if dir == "" {
		dir = DefaultDir(m.common)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	m.loopDir = filepath.Join(realPath(dir), m.loop)
	m.intPath = filepath.Join(m.loopDir, "integration")
	m.metaPath = filepath.Join(m.loopDir, "start.json")
	m.intBranch = "aot/" + m.loop
	m.attemptRef = "aot-attempt/" + m.loop + "/"

	stateFile := o.StateFile
	if stateFile == "" {
		stateFile = filepath.Join(abs, ".claude", "aot-loop-state.md")
	}
	m.protect = newProtected(m.root, stateFile)
	return m, nil
}

// knownVersion is the first answer of git version, asked once a process:
// a Temporal worker opens a manager per attempt.
var knownVersion struct {
	sync.Mutex
	v string
}

// gitVersion is git's version line.
func (m *Manager) gitVersion(ctx context.Context, dir string) string {
	knownVersion.Lock()
	defer knownVersion.Unlock()
	if knownVersion.v == "" {
		knownVersion.v, _ = m.line(ctx, dir, "version")
	}
	return knownVersion.v
}

// DefaultDir is where the worktrees of the repository whose git common
// directory is common live when Options.Dir is empty: in the user's cache
// folder, one folder per repository, named after it and told apart by a hash
// of its common directory, e.g. ~/.cache/aot/worktrees/project-1a2b3c4d5e6f.
func DefaultDir(common string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), "aot-"+strconv.Itoa(os.Getuid()))
	}
	name := filepath.Base(common)
	if name == ".git" {
		name = filepath.Base(filepath.Dir(common))
	}
	name = strings.TrimSuffix(name, ".git")
	sum := sha256.Sum256([]byte(common))
	return filepath.Join(base, "aot", "worktrees", slug(name)+"-"+hex.EncodeToString(sum[:6]))
}

// IntegrationDir is the project's folder in the integration worktree: the
// merged work so far, for probes, judges and the verifier, which must only
// read it.
func (m *Manager) IntegrationDir() string { return m.inProject(m.intPath) }

// WorktreesDir is the folder of this loop's worktrees.
func (m *Manager) WorktreesDir() string { return m.loopDir }

// Branch is the integration branch (without refs/heads/).
func (m *Manager) Branch() string { return m.intBranch }

// Start creates the integration worktree, or on a resumed run re-creates it
// from the integration branch, which keeps what earlier runs merged. It
// never touches the person's working tree.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return nil
	}
	branchHead, _ := m.line(ctx, m.root, "rev-parse", "--verify", "-q", "refs/heads/"+m.intBranch+"^{commit}")
	var sp startPoint
	data, metaErr := os.ReadFile(m.metaPath)
	if metaErr == nil {
		metaErr = json.Unmarshal(data, &sp)
	}
	if branchHead == "" || metaErr != nil || sp.Head == "" {
		head, err := m.line(ctx, m.root, "rev-parse", "--verify", "HEAD^{commit}")
		if err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
		ref, _ := m.line(ctx, m.root, "symbolic-ref", "-q", "HEAD")
		sp = startPoint{Branch: ref, Head: head}
		if branchHead != "" { // the branch survived its record: keep its work
			if base, err := m.line(ctx, m.root, "merge-base", head, branchHead); err == nil {
				sp.Head = base
			}
		}
		if err := os.MkdirAll(m.loopDir, 0o700); err != nil {
			return fmt.Errorf("workspace: the worktrees' folder (choose another with --worktree-dir): %w", err)
		}
		data, _ := json.Marshal(sp)
		if err := writeFile(m.metaPath, data); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	// A crash may have left the integration worktree half-updated or locked:
	// it holds nothing the branch does not, so it is always made afresh.
	m.removeWorktree(ctx, m.root, m.intPath)
	args := []string{"worktree", "add", "-q", "--lock", "--reason", m.inUse(), m.intPath, m.intBranch}
	if branchHead == "" {
		args = []string{"worktree", "add", "-q", "--lock", "--reason", m.inUse(), "-b", m.intBranch, m.intPath, sp.Head}
	}
	if _, err := m.git(ctx, m.root, args...); err != nil {
		return fmt.Errorf("workspace: integration worktree: %w", err)
	}
	head, err := m.line(ctx, m.intPath, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	m.protect.removeFrom(m.intPath)
	m.start, m.head, m.runStart, m.started = sp, head, head, true
	return nil
}

// StartDetached readies the manager to make attempts at commit whose work
// is merged elsewhere (a Temporal worker's attempt, pushed and merged by
// another activity): no integration worktree nor branch is made, and
// [Manager.Finish] commits the attempt on its branch as always but merges
// nothing; Merge.Commit is then the attempt's commit. It is not for a
// manager already started.
func (m *Manager) StartDetached(commit string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		m.head, m.runStart, m.started, m.detached = commit, commit, true, true
	}
}

// Plan names attempt number n of atom; it creates nothing. The same atom and
// number always get the same names.
func (m *Manager) Plan(atom string, n int) Attempt {
	name := slug(atom) + "-" + strconv.Itoa(n)
	p := filepath.Join(m.loopDir, name)
	return Attempt{Atom: atom, Number: n, Path: p, Dir: m.inProject(p), Branch: m.attemptRef + name}
}

// inProject is the project's folder inside a worktree.
func (m *Manager) inProject(worktree string) string {
	if m.rel == "" {
		return worktree
	}
	return filepath.Join(worktree, filepath.FromSlash(m.rel))
}

// runDir is where git runs for repository-wide commands: the integration
// worktree once it exists, so that nothing reads the person's index.
func (m *Manager) runDir() string {
	if _, err := os.Stat(filepath.Join(m.intPath, ".git")); err == nil {
		return m.intPath
	}
	return m.root
}

// slug makes s usable as one path element and one ref name component.
func slug(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		case r == '.' && b.Len() > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := strings.ReplaceAll(b.String(), "..", "_.")
	out = strings.TrimSuffix(out, ".lock")
	if out != s || len(out) > 64 || out == "integration" {
		sum := sha256.Sum256([]byte(s))
		if len(out) > 48 {
			out = out[:48]
		}
		out += "_" + hex.EncodeToString(sum[:4])
	}
	if out == "" || out[0] == '-' {
		out = "_" + out
	}
	return out
}

// realPath resolves symbolic links in p, or in its longest existing parent.
func realPath(p string) string {
	p = filepath.Clean(p)
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(realPath(parent), filepath.Base(p))
}

// writeFile writes data to name through a temporary file and a rename.
func writeFile(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// protected are the engine's files, repository-relative: never committed,
// never left in a checkout.
type protected struct {
	state string // the state file, "" when it is outside the repository
	dir   string // the aot-loop folder beside it
}

func newProtected(root, stateFile string) protected {
	abs, err := filepath.Abs(stateFile)
	if err != nil {
		return protected{}
	}
	rel, err := filepath.Rel(root, realPath(abs))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return protected{}
	}
	rel = filepath.ToSlash(rel)
	return protected{state: rel, dir: path.Join(path.Dir(rel), "aot-loop")}
}

// match reports whether the repository-relative path p is the engine's.
func (p protected) match(name string) bool {
	if p.state == "" {
		return false
	}
	return name == p.state || strings.HasPrefix(name, p.state+".") ||
		name == p.dir || strings.HasPrefix(name, p.dir+"/")
}

// excludes are pathspecs leaving the engine's files out of a git command.
func (p protected) excludes() []string {
	if p.state == "" {
		return nil
	}
	return []string{
		":(exclude,literal)" + p.state,
		":(exclude,glob)" + globEscape(p.state) + ".*",
		":(exclude,literal)" + p.dir,
	}
}

// removeFrom deletes the engine's files from a checkout rooted at worktree.
func (p protected) removeFrom(worktree string) {
	if p.state == "" {
		return
	}
	state := filepath.Join(worktree, filepath.FromSlash(p.state))
	os.Remove(state)
	if entries, err := os.ReadDir(filepath.Dir(state)); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), filepath.Base(state)+".") {
				os.RemoveAll(filepath.Join(filepath.Dir(state), e.Name()))
			}
		}
	}
	os.RemoveAll(filepath.Join(worktree, filepath.FromSlash(p.dir)))
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// GitSupported reports whether `git version` printed a git that isolation
// works with (2.38 or later: merge-tree --write-tree).
func GitSupported(version string) bool { return versionAtLeast(version, 2, 38) }

// versionAtLeast reports whether "git version X.Y.Z..." is at least
// major.minor.
func versionAtLeast(v string, major, minor int) bool {
	fields := strings.Fields(v)
	if len(fields) < 3 {
		return false
	}
	parts := strings.SplitN(fields[2], ".", 3)
	if len(parts) < 2 {
		return false
	}
	x, err1 := strconv.Atoi(parts[0])
	y, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (x > major || x == major && y >= minor)
}
