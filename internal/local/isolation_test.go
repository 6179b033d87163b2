//go:build unix

package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// gitProject is a git repository with one commit holding notes.txt and the
// state file (tracked, as people do): the loop must never hand a copy of it
// to a worker nor commit it.
func gitProject(t *testing.T, ids [][2]string, base string) (path, repo string) {
	t.Helper()
	path = project(t, atoms(ids...), func(s *state.State) {
		s.Objective.BaseCase = &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: base}}
		s.Objective.Constraints.MaxParallelAgents = 3
	})
	repo = engine.ProjectRoot(path)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache")) // the worktrees
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	git(t, repo, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "-A")
	git(t, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
	return path, repo
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// rmw is a worker that reads notes.txt, waits, and writes it back with its
// line added: two of them at once lose a line without isolation. It records
// where it ran, and whether it saw a copy of the state file there.
const rmw = `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
pwd >> "$WHERE"
[ -e .claude/aot-loop-state.md ] && echo "$AOT_ATOM_ID saw a copy of the state file" >> "$WHERE.copies"
old=$(cat notes.txt); sleep 0.3
printf '%s\n%s\n' "$old" "$AOT_ATOM_ID" > notes.txt
echo '{"success": true, "summary": "added a line", "artifacts": ["notes.txt"]}'`

func TestIsolatedWorkersNeverLoseEachOthersChanges(t *testing.T) {
	path, repo := gitProject(t, [][2]string{{"A", ""}, {"B", ""}, {"C", "A"}}, "grep -qx A notes.txt && grep -qx B notes.txt && grep -qx C notes.txt")
	where := filepath.Join(t.TempDir(), "where")
	t.Setenv("WHERE", where)
	ag := &agent.Exec{Command: "sh " + writeScript(t, rmw)}
	out := runEngine(t, path, ag, func(o *Options) { o.Isolation = engine.IsolationAuto; o.MaxParallel = 3 })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	// Both parallel read-modify-writes are there: one conflicted and re-ran.
	data, _ := os.ReadFile(filepath.Join(repo, "notes.txt"))
	for _, l := range []string{"start", "A", "B", "C"} {
		if !strings.Contains("\n"+string(data), "\n"+l+"\n") {
			t.Fatalf("notes.txt lost %q:\n%s", l, data)
		}
	}
	conflicts := 0
	for _, m := range events(t, path, journal.Merge) {
		if !*m.OK {
			conflicts++
		}
	}
	if conflicts == 0 {
		t.Fatal("no conflict recorded for two parallel writes of notes.txt")
	}
	// Workers ran in their worktrees, never in the repository, and never
	// saw a copy of the state file.
	dirs, _ := os.ReadFile(where)
	for _, d := range strings.Fields(string(dirs)) {
		if d == repo {
			t.Fatalf("a worker ran in the repository itself")
		}
	}
	if copies, err := os.ReadFile(where + ".copies"); err == nil {
		t.Fatalf("%s", copies)
	}
	// The work landed on main as commits naming their atoms; the state file
	// was never committed again; no worktree or attempt branch is left.
	log := git(t, repo, "log", "--format=%s", "main")
	for _, id := range []string{"A: do A", "B: do B", "C: do C"} {
		if !strings.Contains(log, id) {
			t.Fatalf("no commit names %q:\n%s", id, log)
		}
	}
	if changed := git(t, repo, "log", "--format=", "--name-only", "main~3..main"); strings.Contains(changed, "aot-loop") {
		t.Fatalf("the loop committed its own files:\n%s", changed)
	}
	if wt := git(t, repo, "worktree", "list"); strings.Count(wt, "\n") != 1 {
		t.Fatalf("worktrees left:\n%s", wt)
	}
	if br := git(t, repo, "branch", "--list", "aot*"); strings.TrimSpace(br) != "" {
		t.Fatalf("branches left: %s", br)
	}
	if !strings.Contains(out.Landing, "main") {
		t.Fatalf("landing = %q", out.Landing)
	}
}

func TestADirtyWorkingTreeIsLeftAsItWas(t *testing.T) {
	path, repo := gitProject(t, [][2]string{{"A", ""}}, "test -f A.ok")
	// The person has work in progress: a changed tracked file and a new one.
	if err := os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("my unsaved thoughts\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "mine.txt"), []byte("draft\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ag := &agent.Exec{Command: `[ "$AOT_ROLE" = worker ] && touch A.ok; echo '{"success": true, "feasible": true, "passed": true, "atoms": []}'`}
	out := runEngine(t, path, ag, func(o *Options) { o.Isolation = engine.IsolationAuto })
	// The base case runs on the merged work, where A.ok is.
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	if data, _ := os.ReadFile(filepath.Join(repo, "notes.txt")); string(data) != "my unsaved thoughts\n" {
		t.Fatalf("notes.txt = %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(repo, "mine.txt")); string(data) != "draft\n" {
		t.Fatalf("mine.txt = %q", data)
	}
	if _, err := os.Stat(filepath.Join(repo, "A.ok")); err == nil {
		t.Fatal("the work was put into a dirty working tree")
	}
	if !strings.Contains(out.Landing, "aot/") {
		t.Fatalf("landing should say how to take the work from its branch: %q", out.Landing)
	}
}

func TestOutsideGitWorkersRunOneAtATime(t *testing.T) {
	path, _, _ := scriptProject(t, []string{"A", "B"}, "test -f A.ok && test -f B.ok", nil)
	dir := engine.ProjectRoot(path)
	// Each worker fails if another is running.
	ag := execAgent(dir, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
[ -e busy ] && { echo '{"success": false, "summary": "another agent was running"}'; exit 0; }
touch busy; sleep 0.2; rm busy; touch "$AOT_ATOM_ID.ok"; echo '{"success": true}'`)
	out := runEngine(t, path, ag, func(o *Options) { o.Isolation = engine.IsolationAuto; o.MaxParallel = 3 })
	s := read(t, path)
	if out.Reason != engine.Completed || s.Atom("A").Attempts+s.Atom("B").Attempts != 0 {
		t.Fatalf("outcome = %+v, attempts A %d B %d: two workers ran at once", out, s.Atom("A").Attempts, s.Atom("B").Attempts)
	}
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDeclaredScopesDecideWhatRunsTogether(t *testing.T) {
	path, _, _ := scriptProject(t, []string{"A", "B", "C"}, "test -f A.ok && test -f B.ok && test -f C.ok", func(s *state.State) {
		s.Atom("A").Scope = []string{"src/a/**"}
		s.Atom("B").Scope = []string{"src/b/**"}
		s.Atom("C").Scope = []string{"src/a/x.go"}
	})
	dir := engine.ProjectRoot(path)
	// Each worker notes who else is running while it runs.
	ag := execAgent(dir, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
touch "running-$AOT_ATOM_ID"; sleep 0.4
for f in running-*; do [ "$f" != "running-$AOT_ATOM_ID" ] && echo "$AOT_ATOM_ID with ${f#running-}" >> together; done
rm "running-$AOT_ATOM_ID"; touch "$AOT_ATOM_ID.ok"; echo '{"success": true}'`)
	// Outside git, without isolation: disjoint scopes run together,
	// overlapping ones never.
	out := runEngine(t, path, ag, func(o *Options) { o.Isolation = engine.IsolationAuto; o.MaxParallel = 3 })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "together"))
	got := string(data)
	if !strings.Contains(got, "A with B") && !strings.Contains(got, "B with A") {
		t.Fatalf("A and B (disjoint scopes) never ran together: %q", got)
	}
	if strings.Contains(got, "A with C") || strings.Contains(got, "C with A") {
		t.Fatalf("A and C (overlapping scopes) ran together: %q", got)
	}
}

func TestStoppedAndCrashedAttemptsLeaveNoWorktreeBehind(t *testing.T) {
	path, repo := gitProject(t, [][2]string{{"A", ""}, {"B", ""}}, "test -f A.ok && test -f B.ok")
	hang := writeScript(t, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
touch "$MARK/started-$AOT_ATOM_ID"; sleep 30`)
	mark := t.TempDir()
	t.Setenv("MARK", mark)

	// kill -9 of the engine while both attempts run in their worktrees.
	cmd := exec.Command(os.Args[0], "-test.run=^TestEngineHelperProcess$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path, crashEnv+"_AGENT=sh "+hang, crashEnv+"_ISOLATION=auto")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, mark, "started-A")
	waitFile(t, mark, "started-B")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if wt := git(t, repo, "worktree", "list"); strings.Count(wt, "\n") < 3 {
		t.Fatalf("expected the crashed run's worktrees:\n%s", wt)
	}

	// The next run cleans the orphans first, then a stop mid-run removes
	// the attempts it kills.
	wait := startEngine(t, path, Options{Settings: engine.Settings{Isolation: engine.IsolationAuto, MaxParallel: 2}, Agent: &agent.Exec{Command: "sh " + hang}})
	_ = os.Remove(filepath.Join(mark, "started-A"))
	_ = os.Remove(filepath.Join(mark, "started-B"))
	waitFile(t, mark, "started-A")
	waitFile(t, mark, "started-B")
	if _, err := state.NewStore(path).Update(func(s *state.State) error {
		r := "enough"
		s.Control.StopRequested, s.Control.StopReason = true, &r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if out := wait(); out.Reason != engine.ManualStop {
		t.Fatalf("outcome = %+v", out)
	}
	removed := 0
	for _, ev := range events(t, path, journal.Worktree) {
		if strings.HasPrefix(ev.Reason, "removed") {
			removed++
		}
	}
	if removed < 2 {
		t.Fatalf("the crashed run's worktrees were not cleaned as orphans (%d)", removed)
	}
	if wt := git(t, repo, "worktree", "list"); strings.Count(wt, "\n") != 1 {
		t.Fatalf("worktrees left:\n%s", wt)
	}
	if br := git(t, repo, "branch", "--list", "aot-attempt/*"); strings.TrimSpace(br) != "" {
		t.Fatalf("attempt branches left: %s", br)
	}
}

// A merge the journal recorded belongs to the attempt that made it: when
// the atom runs again (reopened by hand here) and the run dies after
// journaling the new attempt's intent, the resumed run does not take the
// old merge for the new attempt's, although attempt numbers restart with
// each run; the atom runs again.
func TestARecordedMergeIsNeverAdoptedForALaterAttempt(t *testing.T) {
	path, repo := gitProject(t, [][2]string{{"A", ""}, {"B", "A"}}, "test -f A.txt && test -f B.txt")
	mark := t.TempDir()
	t.Setenv("MARK", mark)
	ag := &agent.Exec{Command: "sh " + writeScript(t, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
echo "$AOT_ATOM_ID" >> "$MARK/calls"
[ "$AOT_ATOM_ID" = B ] && [ ! -e "$MARK/b-works" ] && { echo '{"success": false, "summary": "not yet"}'; exit 0; }
echo "$AOT_ATOM_ID" >> "$AOT_ATOM_ID.txt"
echo '{"success": true, "summary": "wrote it", "artifacts": ["'$AOT_ATOM_ID'.txt"]}'`)}
	limit := func(o *Options) { o.Isolation = engine.IsolationAuto; o.MaxParallel = 1 }
	if _, err := state.NewStore(path).Update(func(s *state.State) error {
		s.Objective.Constraints.MaxAttemptsPerAtom = 1
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if out := runEngine(t, path, ag, limit); out.Reason == engine.Completed {
		t.Fatalf("the first run should stop on B: %+v", out)
	}
	loop := ""
	if _, err := state.NewStore(path).Update(func(s *state.State) error {
		loop = s.Control.LoopID
		s.Objective.Constraints.MaxAttemptsPerAtom = 3
		for i := range s.Atoms {
			s.Atoms[i].Status, s.Atoms[i].Attempts = state.StatusPending, 0
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := git(t, repo, "log", "--format=%s", "aot/"+loop); !strings.Contains(got, "A: do A") {
		t.Fatalf("A's first merge is not on the loop's branch:\n%s", got)
	}
	// What a run that died right after journaling A's next intent leaves.
	jr, err := journal.Open(journal.PathFor(path))
	if err != nil {
		t.Fatal(err)
	}
	_ = jr.Append(journal.MergeIntent(journal.Event{Atom: "A", Attempt: 2}, journal.WorktreeData{Number: 1, Commit: "0123456789abcdef0123456789abcdef01234567"}))
	if err := jr.Close(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mark, "b-works"), nil, 0o644)
	os.Remove(filepath.Join(mark, "calls"))
	if out := runEngine(t, path, ag, limit); out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	for _, ev := range events(t, path, journal.AtomFinish) {
		if strings.HasPrefix(ev.Reason, "adopted") {
			t.Fatalf("an old merge was adopted: %+v", ev)
		}
	}
	calls, _ := os.ReadFile(filepath.Join(mark, "calls"))
	if got := strings.Count(string(calls), "A\n"); got != 1 {
		t.Fatalf("A ran %d times in the resumed run, want once:\n%s", got, calls)
	}
}
