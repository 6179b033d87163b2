package durable

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/engine"
)

// hermeticGit keeps the person's and the system's git config out of the
// test's git processes.
func hermeticGit(t testing.TB) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, "gitconfig"))
}

// gitT runs git as a person would, and returns its trimmed output.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Person", "-c", "user.email=p@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRemote makes a bare repository whose main branch holds one seed
// commit with files; it returns the repository and the commit.
func newRemote(t testing.TB, files map[string]string) (string, string) {
	t.Helper()
	hermeticGit(t)
	dir := t.TempDir()
	bare := filepath.Join(dir, "remote.git")
	gitT(t, dir, "init", "-q", "--bare", bare)
	seed := filepath.Join(dir, "seed")
	gitT(t, dir, "init", "-q", seed)
	files["README.md"] = "seed\n"
	for name, content := range files {
		writeFile(t, filepath.Join(seed, name), content)
	}
	gitT(t, seed, "add", "-A")
	gitT(t, seed, "commit", "-q", "-m", "seed")
	gitT(t, seed, "push", "-q", bare, "HEAD:refs/heads/main")
	return bare, gitT(t, seed, "rev-parse", "HEAD")
}

func writeFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// execAgents builds the exec agent the loop chose, as aot worker does.
func execAgents(ch AgentChoice, role agent.Role, dirs AgentDirs) (agent.Agent, error) {
	cfg := backend.Config{Spec: backend.Spec{Agent: "exec", Command: ch.Command}}
	return backend.New(cfg, backend.Env{})
}

func newActivities(t *testing.T) *Activities {
	return &Activities{Cache: t.TempDir(), Identity: "test-worker", NewAgent: execAgents, Heartbeat: 10 * time.Millisecond}
}

// attemptInput is atom's first worker attempt on base, the agent running
// script.
func attemptInput(repo, base, atom, script string) AttemptInput {
	return AttemptInput{
		Loop: "loop-1", Repo: repo, BaseCommit: base, Branch: "aot/loop-1/" + atom + "-1",
		Task:  agent.Task{Role: agent.Worker, Atom: agent.AtomRef{ID: atom}, Attempt: 1},
		Agent: AgentChoice{Agent: "exec", Command: script},
	}
}

// branchOf is the commit of branch in repo, "" when it has none.
func branchOf(t *testing.T, repo, branch string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// noWorktrees fails when the cache holds an activity's folder or a clone
// still registers a worktree in use: the only ones left are those released
// for the next attempts (marked free, their attempt's branch deleted).
func noWorktrees(t *testing.T, a *Activities) {
	t.Helper()
	if entries, _ := os.ReadDir(filepath.Join(a.Cache, "work")); len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("worktrees left in the cache: %v", names)
	}
	repos, _ := filepath.Glob(filepath.Join(a.Cache, "repos", "*", ".git"))
	for _, r := range repos {
		list := gitT(t, filepath.Dir(r), "worktree", "list", "--porcelain")
		for i, rec := range strings.Split(strings.TrimSpace(list), "\n\n") {
			p, _, _ := strings.Cut(strings.TrimPrefix(rec, "worktree "), "\n")
			_, err := os.Stat(filepath.Dir(p) + ".free")
			_, branch, _ := strings.Cut(rec, "\nbranch ")
			if i > 0 && (err != nil || branch == "" || gitOK(filepath.Dir(r), "rev-parse", "--verify", "-q", branch)) {
				t.Errorf("the clone still registers a worktree in use:\n%s", list)
			}
		}
	}
}

func TestAttemptPushesTheWorkersCommitToTheAtomsBranch(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	var env testsuite.WorkflowTestSuite
	ae := env.NewTestActivityEnvironment()
	a.Register(ae)
	var mu sync.Mutex
	beats := 0
	ae.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		beats++
		mu.Unlock()
	})
	in := attemptInput(repo, seed, "A1", `mkdir -p src && echo hello > src/a.txt && sleep 0.2 && echo '{"success": true, "summary": "wrote a"}'`)
	val, err := ae.ExecuteActivity(AttemptActivity, in)
	if err != nil {
		t.Fatal(err)
	}
	var res AttemptResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Kind != "" || !res.Result.Success || res.Worker != "test-worker" {
		t.Fatalf("result: %+v", res)
	}
	if got := branchOf(t, repo, in.Branch); got == "" || got != res.Commit {
		t.Fatalf("branch %s is at %q, the result says %q", in.Branch, got, res.Commit)
	}
	if diff := cmp.Diff([]string{"src/a.txt"}, res.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if got := gitT(t, repo, "show", res.Commit+":src/a.txt"); got != "hello" {
		t.Errorf("src/a.txt = %q", got)
	}
	if got := gitT(t, repo, "rev-parse", res.Commit+"^"); got != seed {
		t.Errorf("the commit's parent is %s, want the base %s", got, seed)
	}
	msg := gitT(t, repo, "log", "-1", "--format=%B", res.Commit)
	for _, want := range []string{"wrote a", "Aot-Loop: loop-1", "Aot-Atom: A1", "Aot-Attempt: 1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	mu.Lock()
	if beats == 0 {
		t.Error("no heartbeat while the agent ran")
	}
	mu.Unlock()
	noWorktrees(t, a)

	// A second attempt in the same cache fetches instead of cloning, and a
	// worker that changed nothing pushes nothing.
	in2 := attemptInput(repo, res.Commit, "A2", `test -f src/a.txt && echo '{"success": true}'`)
	res2, err := a.Attempt(context.Background(), in2)
	if err != nil || res2.Kind != "" || res2.Commit != "" || len(res2.Files) != 0 {
		t.Fatalf("no change: %+v, %v", res2, err)
	}
	if got := branchOf(t, repo, in2.Branch); got != "" {
		t.Errorf("nothing changed, yet %s was pushed", in2.Branch)
	}
}

func TestAFailedAttemptIsAResultAndPushesNothing(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	for _, tc := range []struct {
		name, script string
		kind         agent.Kind
	}{
		{"crash", `echo half > half.txt; exit 3`, agent.KindCrash},
		{"garbage", `echo half > half.txt; echo not json`, agent.KindMalformed},
		{"reported failure", `echo half > half.txt; echo '{"success": false, "summary": "cannot"}'`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newActivities(t)
			in := attemptInput(repo, seed, "F", tc.script)
			in.Branch += "-" + strings.ReplaceAll(tc.name, " ", "-")
			res, err := a.Attempt(context.Background(), in)
			if err != nil {
				t.Fatalf("a failed attempt is a result, not an error: %v", err)
			}
			if res.Kind != tc.kind || res.Commit != "" || res.Result.Success {
				t.Errorf("result: %+v", res)
			}
			if tc.kind != "" && res.Reason == "" {
				t.Error("no reason")
			}
			if got := branchOf(t, repo, in.Branch); got != "" {
				t.Errorf("a failed attempt pushed %s", in.Branch)
			}
			noWorktrees(t, a)
		})
	}
}

func TestAttemptTimeoutKillsTheAgent(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	in := attemptInput(repo, seed, "T", `sleep 30`)
	in.Timeout = 300 * time.Millisecond
	start := time.Now()
	res, err := a.Attempt(context.Background(), in)
	if err != nil || res.Kind != agent.KindTimeout {
		t.Fatalf("result %+v, error %v", res, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the attempt took %s", d)
	}
	noWorktrees(t, a)
}

// pushed runs a worker attempt that writes files and returns its branch.
func pushed(t *testing.T, a *Activities, repo, base, atom, script string) string {
	t.Helper()
	in := attemptInput(repo, base, atom, script+` && echo '{"success": true}'`)
	res, err := a.Attempt(context.Background(), in)
	if err != nil || res.Commit == "" {
		t.Fatalf("attempt %s: %+v, %v", atom, res, err)
	}
	return in.Branch
}

func TestMergesLandInOrderAndAConflictPushesNothing(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{"shared.txt": "one\n"})
	a := newActivities(t)
	b1 := pushed(t, a, repo, seed, "A", `echo a > a.txt`)
	b2 := pushed(t, a, repo, seed, "B", `echo b > b.txt`)
	b3 := pushed(t, a, repo, seed, "C", `echo c > shared.txt`)
	b4 := pushed(t, a, repo, seed, "D", `echo d > shared.txt`)

	merge := func(branch, atom string) MergeResult {
		t.Helper()
		r, err := a.Merge(context.Background(), MergeInput{Repo: repo, Base: "main", Branch: branch, Atom: atom})
		if err != nil {
			t.Fatalf("merge %s: %v", branch, err)
		}
		return r
	}
	r1 := merge(b1, "A")
	r2 := merge(b2, "B")
	if r1.Conflict || r2.Conflict || branchOf(t, repo, "main") != r2.Commit {
		t.Fatalf("merges: %+v %+v; main at %s", r1, r2, branchOf(t, repo, "main"))
	}
	if diff := cmp.Diff([]string{"b.txt"}, r2.Files); diff != "" {
		t.Errorf("files of the second merge (-want +got):\n%s", diff)
	}
	// Each merge is one commit on the tip, as a local run merges, and the
	// atom's branch is gone from the remote.
	if got := gitT(t, repo, "rev-parse", r2.Commit+"^"); got != r1.Commit {
		t.Errorf("the merge's parent is %s, want the previous merge %s", got, r1.Commit)
	}
	for _, b := range []string{b1, b2} {
		if got := branchOf(t, repo, b); got != "" {
			t.Errorf("branch %s is still on the remote after its merge", b)
		}
	}
	// A Merge retried after its push went through merges nothing again:
	// it finds its commit.
	if again := merge(b2, "B"); again.Conflict || again.Commit != r2.Commit {
		t.Errorf("merging %s again: %+v", b2, again)
	}

	r3 := merge(b3, "C")
	if r3.Conflict {
		t.Fatalf("C: %+v", r3)
	}
	before := branchOf(t, repo, "main")
	r4 := merge(b4, "D")
	if !r4.Conflict {
		t.Fatalf("D changes shared.txt as C did: want a conflict, got %+v", r4)
	}
	if diff := cmp.Diff([]string{"shared.txt"}, r4.Files); diff != "" {
		t.Errorf("conflict files (-want +got):\n%s", diff)
	}
	if got := branchOf(t, repo, "main"); got != before {
		t.Errorf("a conflict moved main from %s to %s", before, got)
	}
	if got := branchOf(t, repo, b4); got != "" {
		t.Errorf("the conflicting branch %s is still on the remote", b4)
	}
	log := gitT(t, repo, "log", "--format=%B", "main")
	for _, atom := range []string{"A", "B", "C"} {
		if n := strings.Count(log, "Aot-Atom: "+atom+"\n"); n != 1 {
			t.Errorf("atom %s merged %d times:\n%s", atom, n, log)
		}
	}
	noWorktrees(t, a)
}

// Two workers merging at once: the push that loses the race is merged
// again on the winner's commit.
func TestConcurrentMergesFromTwoWorkersBothLand(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	w1, w2 := newActivities(t), newActivities(t)
	var branches []string
	for i, w := range []*Activities{w1, w2, w1, w2} {
		atom := "M" + strconv.Itoa(i)
		branches = append(branches, pushed(t, w, repo, seed, atom, `echo x > `+atom+`.txt`))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(branches))
	for i, b := range branches {
		w := []*Activities{w1, w2}[i%2]
		wg.Go(func() {
			_, errs[i] = w.Merge(context.Background(), MergeInput{Repo: repo, Base: "main", Branch: b, Atom: "M" + strconv.Itoa(i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("merge %d: %v", i, err)
		}
	}
	tree := strings.Fields(gitT(t, repo, "ls-tree", "--name-only", "main"))
	for i := range branches {
		if !slices.Contains(tree, "M"+strconv.Itoa(i)+".txt") {
			t.Errorf("main lacks M%d.txt: %v", i, tree)
		}
	}
}

const verifyState = `---
objective:
  goal: "a.txt exists"
  base_case:
    checklist:
      - item: "a.txt is there"
        check:
          type: file
          value: "a.txt"
      - item: "it says a"
        check:
          type: command
          value: "grep -q a a.txt"
%s
control:
  status: running
  iteration: 0
  stall_count: 0
  prev_pending_count: -1
  stop_requested: false
  stop_reason: null
  redirect_requested: false

atoms:
  - id: A
    description: "write a.txt"
    status: pending
    depends_on: []

decompositions: []
or_groups: {}
bindings: {}
trail: []
---
`

func TestVerifyRunsTheBaseCaseAtTheCommit(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	b := pushed(t, a, repo, seed, "A", `echo a > a.txt`)
	done := branchOf(t, repo, b)
	plain := []byte(strings.Replace(verifyState, "%s\n", "", 1))
	judged := []byte(strings.Replace(verifyState, "%s", `      - item: "reads well"
        check:
          type: assertion
          value: "a.txt reads well"`, 1))
	judge := func(passed bool, why string) AgentChoice {
		return AgentChoice{Agent: "exec", Command: fmt.Sprintf(`echo '{"passed": %t, "evidence": "%s"}'`, passed, why)}
	}

	for _, tc := range []struct {
		name     string
		commit   string
		state    []byte
		judge    *AgentChoice
		passed   bool
		failures []string // prefixes
	}{
		{"passes at the work", done, plain, nil, true, nil},
		{"fails at the seed", seed, plain, nil, false, []string{"a.txt is there: ", "it says a: "}},
		{"a judged check without a judge is not passed", done, judged, nil, false, []string{"reads well: not judged"}},
		{"the worker's judge passes a judged check", done, judged, ptr(judge(true, "it does")), true, nil},
		{"the worker's judge fails a judged check", done, judged, ptr(judge(false, "it rambles")), false, []string{"reads well: it rambles"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := VerifyInput{Repo: repo, Commit: tc.commit, State: tc.state}
			if tc.judge != nil {
				in.Judge, in.Agent = true, *tc.judge
			}
			r, err := a.Verify(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			failures := engine.Failures(r.Report)
			if r.Report.Passed != tc.passed || len(failures) != len(tc.failures) {
				t.Fatalf("verdict: %+v, failures %q", r.Report, failures)
			}
			for i, p := range tc.failures {
				if !strings.HasPrefix(failures[i], p) {
					t.Errorf("failure %d = %q, want it to start with %q", i, failures[i], p)
				}
			}
			if tc.judge != nil && (len(r.Events) == 0 || r.Events[0].Role != string(agent.Judge)) {
				t.Errorf("the judge's ruling is not among the events: %+v", r.Events)
			}
		})
	}
	if _, err := a.Verify(context.Background(), VerifyInput{Repo: repo, Commit: seed, State: []byte("not a state")}); err == nil {
		t.Error("a state that does not parse verified")
	}
	noWorktrees(t, a)
}

func TestSweepRemovesWorktreesOfDeadWorkers(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	c, err := a.openClone(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	live, err := a.newScratch(context.Background(), c, seed)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := a.newScratch(context.Background(), c, seed)
	if err != nil {
		t.Fatal(err)
	}
	dead.lock.Unlock() // as when its worker died
	if n := a.sweep(context.Background()); n != 1 {
		t.Errorf("sweep removed %d worktrees, want 1", n)
	}
	if _, err := os.Stat(dead.dir); err == nil {
		t.Error("the dead worker's worktree is still there")
	}
	if _, err := os.Stat(filepath.Join(live.repo, ".git")); err != nil {
		t.Errorf("the running activity's repository was touched: %v", err)
	}
	live.remove()
	noWorktrees(t, a)
}

func ptr[T any](v T) *T { return &v }

// An attempt's agent, and a verification's judge, render their prompts
// with the project's own templates, as the project has them at the
// attempt's commit: .claude/aot-prompts beside the state file, in the
// project's folder of the repository.
func TestAttemptsUseTheProjectsPromptTemplates(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{
		"app/.claude/aot-prompts/worker.tmpl": "{{define \"worker\"}}our own worker prompt{{end}}",
		"app/.claude/aot-prompts/judge.tmpl":  "{{define \"judge\"}}our own judge prompt{{end}}",
	})
	a := newActivities(t)
	var seen []string
	a.NewAgent = func(ch AgentChoice, role agent.Role, dirs AgentDirs) (agent.Agent, error) {
		tmpl, err := os.ReadFile(filepath.Join(dirs.Prompts, string(role)+".tmpl"))
		if err != nil {
			t.Errorf("%s: the project's templates are not at %q: %v", role, dirs.Prompts, err)
		}
		seen = append(seen, string(tmpl))
		return execAgents(ch, role, dirs)
	}
	in := attemptInput(repo, seed, "A", `echo '{"success": true}'`)
	in.Task.StateFile, in.Task.Workdir = "app/.claude/aot-loop-state.md", "app"
	if _, err := a.Attempt(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	judged := []byte(strings.Replace(verifyState, "%s", `      - item: "reads well"
        check:
          type: assertion
          value: "it reads well"`, 1))
	v := VerifyInput{Repo: repo, Commit: seed, State: judged, Project: "app", Judge: true, StateFile: "app/.claude/aot-loop-state.md",
		Agent: AgentChoice{Agent: "exec", Command: `echo '{"passed": true}'`}}
	if _, err := a.Verify(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	want := []string{`{{define "worker"}}our own worker prompt{{end}}`, `{{define "judge"}}our own judge prompt{{end}}`}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("templates the agents were built with (-want +got):\n%s", diff)
	}
}

// The loop's own files (the state file, files beside it that start with
// its name, the aot-loop folder) are never committed by a worker, nor
// merged: the rule of a local run, from the same code.
func TestAttemptNeverCommitsTheLoopsOwnFiles(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{"app/.claude/aot-loop-state.md": "the loop\n"})
	a := newActivities(t)
	in := attemptInput(repo, seed, "A", `echo mine > a.txt && echo overwritten > .claude/aot-loop-state.md && echo lock > .claude/aot-loop-state.md.lock && `+
		`mkdir -p .claude/aot-loop && echo log > .claude/aot-loop/events.ndjson && echo '{"success": true, "artifacts": ["a.txt"]}'`)
	in.Task.StateFile, in.Task.Workdir = "app/.claude/aot-loop-state.md", "app"
	res, err := a.Attempt(context.Background(), in)
	if err != nil || res.Commit == "" {
		t.Fatalf("attempt: %+v %v", res, err)
	}
	if diff := cmp.Diff([]string{"a.txt"}, res.Files); diff != "" {
		t.Errorf("files of the attempt (-want +got):\n%s", diff)
	}
	r, err := a.Merge(context.Background(), MergeInput{Repo: repo, Base: "main", Branch: in.Branch, Atom: "A", Project: "app", StateFile: in.Task.StateFile})
	if err != nil || r.Conflict {
		t.Fatalf("merge: %+v %v", r, err)
	}
	for _, commit := range []string{res.Commit, r.Commit} {
		files := gitT(t, repo, "ls-tree", "-r", "--name-only", commit)
		if got := gitT(t, repo, "show", commit+":app/.claude/aot-loop-state.md"); got != "the loop" || strings.Contains(files, "aot-loop/") || strings.Contains(files, ".lock") {
			t.Errorf("commit %s holds the loop's own files: state %q\n%s", short(commit), got, files)
		}
		if got := gitT(t, repo, "show", commit+":app/a.txt"); got != "mine" {
			t.Errorf("commit %s: app/a.txt = %q", short(commit), got)
		}
	}
	noWorktrees(t, a)
}

// Clean deletes the loop's leftover atom branches from the remote, and no
// other branch: not the integration branch, not another loop's.
func TestCleanDeletesOnlyTheLoopsAtomBranches(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	for _, b := range []string{"aot/loop-1/integration", "aot/loop-1/A-1", "aot/loop-1/B-2", "aot/loop-10/A-1", "aot/other/A-1"} {
		gitT(t, repo, "branch", b, seed)
	}
	a := newActivities(t)
	if err := a.Clean(context.Background(), CleanInput{Repo: repo, Prefix: "aot/loop-1/", Keep: "aot/loop-1/integration"}); err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(gitT(t, repo, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/aot/"))
	if diff := cmp.Diff([]string{"aot/loop-1/integration", "aot/loop-10/A-1", "aot/other/A-1"}, got); diff != "" {
		t.Errorf("branches left (-want +got):\n%s", diff)
	}
	if err := a.Clean(context.Background(), CleanInput{Repo: repo, Prefix: "aot", Keep: ""}); err == nil {
		t.Error("a prefix that is not a folder of branches was accepted")
	}
}

// aot run --check-timeout reaches the workers: a base-case command that
// sets no timeout of its own is killed at the loop's check timeout, not at
// the 60s default.
func TestVerifyKillsACommandAtTheLoopsCheckTimeout(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{"a.txt": "a\n"})
	a := newActivities(t)
	slow := []byte(strings.Replace(verifyState, "%s", `      - item: "takes its time"
        check:
          type: command
          value: "sleep 30"`, 1))
	start := time.Now()
	r, err := a.Verify(context.Background(), VerifyInput{Repo: repo, Commit: seed, State: slow, CheckTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the verification took %s with a 1s check timeout", took)
	}
	failures := engine.Failures(r.Report)
	if r.Report.Passed || len(failures) != 1 || !strings.Contains(failures[0], "timed out after 1s") {
		t.Errorf("verdict %+v, failures %q: want the slow check timed out after 1s", r.Report.Passed, failures)
	}
	noWorktrees(t, a)
}

func TestSweepRemovesAttemptWorktreesOfDeadWorkersFromTheClone(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	ctx := context.Background()
	c, err := a.openClone(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := a.newAttemptTree(ctx, c, seed, "L", "", "", "A", 1)
	if err != nil {
		t.Fatal(err)
	}
	// Its worker died: the lock is free, the worktree and branch stay.
	dead.sc.lock.Unlock()
	if got := gitT(t, c.dir, "branch", "--list", "aot-attempt/*"); !strings.Contains(got, dead.a.Branch) {
		t.Fatalf("the attempt's branch is not in the clone: %q", got)
	}
	live, err := a.newAttemptTree(ctx, c, seed, "L", "", "", "A", 1)
	if err != nil {
		t.Fatalf("the same attempt again beside the dead one: %v", err)
	}
	if n := a.sweep(ctx); n != 1 {
		t.Errorf("sweep removed %d folders, want 1", n)
	}
	if got := gitT(t, c.dir, "branch", "--list", "aot-attempt/*"); strings.Contains(got, dead.a.Branch) || !strings.Contains(got, live.a.Branch) {
		t.Errorf("branches after the sweep: %q, want only %s", got, live.a.Branch)
	}
	if _, err := os.Stat(filepath.Join(live.a.Path, ".git")); err != nil {
		t.Errorf("the running attempt's worktree was touched: %v", err)
	}
	if _, err := os.Stat(dead.a.Path); err == nil || dead.a.Path == live.a.Path {
		t.Errorf("the dead attempt's worktree %s is still there, or was taken by the live one", dead.a.Path)
	}
	live.remove(ctx)
	if got := gitT(t, c.dir, "branch", "--list", "aot-attempt/*"); got != "" {
		t.Errorf("branches left: %q", got)
	}
	noWorktrees(t, a)
}

// A worker whose clone already holds the base does not fetch it; a retry
// of an attempt whose dead predecessor pushed meanwhile, unseen by that
// clone, still replaces the predecessor's push.
func TestARetriedAttemptReplacesAPushItsCloneHasNotSeen(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	first, second := newActivities(t), newActivities(t)
	write := func(text string) string {
		return `echo ` + text + ` > a.txt && echo '{"success": true, "summary": "wrote ` + text + `"}'`
	}
	// The second worker's clone is made, with the base in it.
	if _, err := second.Attempt(context.Background(), attemptInput(repo, seed, "B", `echo '{"success": true}'`)); err != nil {
		t.Fatal(err)
	}
	dead, err := first.Attempt(context.Background(), attemptInput(repo, seed, "A", write("one")))
	if err != nil || dead.Commit == "" {
		t.Fatalf("the first try: %+v, %v", dead, err)
	}
	in := attemptInput(repo, seed, "A", write("two"))
	again, err := second.Attempt(context.Background(), in)
	if err != nil || again.Commit == "" || again.Commit == dead.Commit {
		t.Fatalf("the retry: %+v, %v", again, err)
	}
	if got := branchOf(t, repo, in.Branch); got != again.Commit {
		t.Errorf("%s is at %s, want the retry's %s", in.Branch, got, again.Commit)
	}
	if got := gitT(t, repo, "show", again.Commit+":a.txt"); got != "two" {
		t.Errorf("a.txt = %q", got)
	}
	noWorktrees(t, first)
	noWorktrees(t, second)
}

// A worker's attempts one after another use one worktree of its clone:
// the next attempt finds none of what the last agent left (a failed one's
// changes, untracked and ignored files), and its commit holds its own work
// alone.
func TestAttemptsOneAfterAnotherReuseOneWorktree(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{".gitignore": "*.log\n"})
	a := newActivities(t)
	ctx := context.Background()
	messy := `echo mess > README.md && echo x > junk.txt && echo y > run.log && mkdir -p d && echo z > d/z.txt && echo '{"success": false, "summary": "gave up"}'`
	r, err := a.Attempt(ctx, attemptInput(repo, seed, "A", messy))
	if err != nil || r.Commit != "" {
		t.Fatalf("the failed attempt: %+v, %v", r, err)
	}
	clean := `test "$(cat README.md)" = seed && test ! -e junk.txt && test ! -e run.log && test ! -e d && echo b > b.txt && echo '{"success": true, "summary": "b"}'`
	r, err = a.Attempt(ctx, attemptInput(repo, seed, "B", clean))
	if err != nil || r.Commit == "" {
		t.Fatalf("the next attempt found what the last one left, or failed: %+v, %v", r, err)
	}
	if files := gitT(t, repo, "diff-tree", "-r", "--name-only", "--no-commit-id", seed, r.Commit); files != "b.txt" {
		t.Errorf("the next attempt's commit changed %q, want b.txt alone", files)
	}
	slots, _ := filepath.Glob(filepath.Join(a.Cache, "trees", "*", "t-*.free"))
	if len(slots) != 1 {
		t.Errorf("free worktrees after two attempts one after another: %v, want one", slots)
	}
	noWorktrees(t, a)
}

// gitOK reports whether git succeeds in dir.
func gitOK(dir string, args ...string) bool {
	return exec.Command("git", append([]string{"-C", dir}, args...)...).Run() == nil
}

// A free worktree that cannot be reused (a git process of the last attempt
// was cut short and left its lock) is replaced by a new one in its place.
func TestAnAttemptReplacesAWorktreeItCannotReuse(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	ctx := context.Background()
	if r, err := a.Attempt(ctx, attemptInput(repo, seed, "A", `echo a > a.txt && echo '{"success": true}'`)); err != nil || r.Commit == "" {
		t.Fatalf("the first attempt: %+v, %v", r, err)
	}
	free, _ := filepath.Glob(filepath.Join(a.Cache, "trees", "*", "t-*.free"))
	if len(free) != 1 {
		t.Fatalf("free worktrees: %v", free)
	}
	wt := filepath.Join(strings.TrimSuffix(free[0], ".free"), "wt")
	admin := strings.TrimPrefix(strings.TrimSpace(readFile(t, filepath.Join(wt, ".git"))), "gitdir: ")
	writeFile(t, filepath.Join(admin, "index.lock"), "")
	r, err := a.Attempt(ctx, attemptInput(repo, seed, "B", `echo b > b.txt && echo '{"success": true}'`))
	if err != nil || r.Commit == "" {
		t.Fatalf("the attempt after a worktree it could not reuse: %+v, %v", r, err)
	}
	if files := gitT(t, repo, "diff-tree", "-r", "--name-only", "--no-commit-id", seed, r.Commit); files != "b.txt" {
		t.Errorf("its commit changed %q, want b.txt alone", files)
	}
	noWorktrees(t, a)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
