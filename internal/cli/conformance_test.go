package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/fakellm"
	"github.com/aot-loop/aot/internal/journal"
)

// TestConformance is the real-agent conformance matrix: every agent (the
// real Claude Code, Codex and Gemini CLIs against the fake model server,
// and the exec agent) under isolation worktree and none, in a git
// repository with one commit (the README's setup), doing what a person
// relies on:
//   - shell: the worker writes out.txt through its shell tool; the loop
//     completes and the work is on the person's branch (worktree: committed
//     and fast-forwarded; none: in the working tree);
//   - edit: the same through the CLI's own file-editing tool;
//   - liar: the worker says it succeeded and wrote out.txt, but wrote
//     nothing: the attempt fails with kind no_change, the loop does not
//     complete, nothing lands;
//   - refused: the worker's write through its editing tool is refused by
//     its CLI (a file outside the project), then it claims success: the
//     refusal is journaled as permission_denied with the tool and the path
//     (Codex logs a refused patch without its path: there, with its
//     words), aot status shows it, the attempt fails with kind
//     permission_denied;
//   - hang: the worker's shell tool never returns: the attempt times out
//     and its whole process tree is killed.
//
// The exec agent has no edit tool and no permission system: its rows are
// shell, liar and hang. A missing CLI fails the test. Rows run in
// parallel, conformanceParallel at a time.
func TestConformance(t *testing.T) {
	aotBin, err := exec.LookPath("aot") // set up by TestMain
	if err != nil {
		t.Fatal(err)
	}
	cliDirs := []string{filepath.Dir(aotBin)}
	for _, name := range []string{"claude", "codex", "gemini"} {
		p, err := fakellm.CLIPath(name)
		if err != nil {
			t.Fatal(err) // never a skip: CI installs them (make agent-clis)
		}
		cliDirs = append(cliDirs, filepath.Dir(p))
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	// Outside the project and outside /tmp (which Codex's sandbox lets
	// commands write): where a refused write aims.
	outside := filepath.Join(cache, "aot-conformance")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}

	var rows []conformanceRow
	for _, ag := range []string{"claude", "codex", "gemini", "exec"} {
		for _, iso := range []string{"worktree", "none"} {
			for _, sc := range []string{"shell", "edit", "liar", "refused", "hang"} {
				if ag == "exec" && (sc == "edit" || sc == "refused") {
					continue
				}
				rows = append(rows, conformanceRow{agent: ag, isolation: iso, scenario: sc, sleep: 4100 + len(rows)})
			}
		}
	}
	start := time.Now()
	results := make([]chan []string, len(rows))
	sem := make(chan struct{}, conformanceParallel)
	base := t.TempDir()
	var wg sync.WaitGroup
	defer wg.Wait() // before the temporary folder goes
	run := 0
	for i := range rows {
		results[i] = make(chan []string, 1)
		r := &rows[i]
		if !selected(t.Name() + "/" + r.name()) {
			continue
		}
		run++
		wg.Add(1)
		r.dir = filepath.Join(base, r.name())
		r.refusedPath = filepath.Join(outside, fmt.Sprintf("%s-%d-%d.txt", r.name(), os.Getpid(), time.Now().UnixNano()))
		r.aot = aotBin
		r.path = strings.Join(cliDirs, string(os.PathListSeparator)) + string(os.PathListSeparator) + os.Getenv("PATH")
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] <- r.run()
		}()
	}
	for i := range rows {
		r := &rows[i]
		t.Run(r.name(), func(t *testing.T) {
			for _, problem := range <-results[i] {
				t.Error(problem)
			}
			if t.Failed() {
				t.Logf("aot run's output:\n%s", r.output)
			}
		})
	}
	t.Logf("conformance matrix: %d rows in %s", run, time.Since(start).Round(time.Second))
}

// selected reports whether go test's -run pattern selects the subtest
// name: the rows start before their subtests, conformanceParallel at a
// time (more than -parallel allows), so the filter is applied here too.
func selected(name string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	levels := strings.Split(name, "/")
	for i, pat := range strings.Split(f.Value.String(), "/") {
		if i >= len(levels) {
			break
		}
		re, err := regexp.Compile(pat)
		if err != nil || !re.MatchString(levels[i]) {
			return false
		}
	}
	return true
}

// conformanceParallel is how many rows run at once: the CLIs mostly wait
// on the fake server and on each other's start.
const conformanceParallel = 6

type conformanceRow struct {
	agent, isolation, scenario string
	sleep                      int    // the hang's unique sleep, to find its process
	dir                        string // the row's own folder: project, home, requests
	refusedPath                string
	path                       string // PATH: aot and the CLIs first
	aot                        string // the aot binary
	output                     string // aot run's stdout and stderr
}

func (r *conformanceRow) name() string { return r.agent + "/" + r.isolation + "/" + r.scenario }

// timeout is the attempt's deadline: room for the CLI's start (Gemini's
// takes seconds), short for a hang.
func (r *conformanceRow) timeout() string {
	if r.scenario != "hang" {
		return "150s"
	}
	return map[string]string{"claude": "20s", "codex": "30s", "gemini": "60s", "exec": "3s"}[r.agent]
}

// run sets the row's project up, runs aot and returns what is wrong.
func (r *conformanceRow) run() (problems []string) {
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	defer os.Remove(r.refusedPath)
	proj := filepath.Join(r.dir, "project")
	if err := r.setUp(proj); err != nil {
		return []string{err.Error()}
	}
	env := []string{"PATH=" + r.path, "NO_COLOR=1", "LANG=C.UTF-8", "TMPDIR=" + os.TempDir()}
	var agentArgs []string
	if r.agent == "exec" {
		agentArgs = []string{"--agent", "exec", "--agent-command", r.execCommand()}
		env = append(env, "HOME="+filepath.Join(r.dir, "home"))
	} else {
		srv, err := fakellm.New(r.script(), fakellm.Options{LogPath: filepath.Join(r.dir, "requests.jsonl"), MaxRequests: 200})
		if err != nil {
			return []string{err.Error()}
		}
		defer srv.Close()
		home := filepath.Join(r.dir, "home")
		env = append(env, fakellm.ClaudeEnv(home, srv.URL())...)
		codex, err := fakellm.CodexHome(home, srv.URL())
		if err != nil {
			return []string{err.Error()}
		}
		gemini, err := fakellm.GeminiEnv(home, srv.URL())
		if err != nil {
			return []string{err.Error()}
		}
		env = append(append(env, codex...), gemini...)
		agentArgs = []string{"--agent", r.agent}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"run", "--isolation", r.isolation, "--agent-timeout", r.timeout()}, agentArgs...)
	cmd := exec.CommandContext(ctx, r.aot, args...)
	cmd.Dir, cmd.Env = proj, env
	out, err := cmd.CombinedOutput()
	r.output = string(out)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return []string{"aot run: " + err.Error()}
	}
	events, err := readEvents(filepath.Join(proj, ".claude", "aot-loop", "events.ndjson"))
	if err != nil {
		return []string{err.Error()}
	}
	hello := func() bool {
		b, _ := os.ReadFile(filepath.Join(proj, "out.txt"))
		return strings.Contains(string(b), "hello")
	}
	onBranch := func() bool {
		b, err := git(proj, "show", "main:out.txt")
		return err == nil && strings.Contains(b, "hello")
	}
	switch r.scenario {
	case "shell", "edit":
		if code != 0 || !strings.Contains(r.output, "completed (completed)") {
			fail("the loop did not complete (exit %d)", code)
		}
		if !hello() {
			fail("out.txt does not say hello in the person's working tree")
		}
		if r.isolation == "worktree" && !onBranch() {
			fail("out.txt is not committed on the person's branch main")
		}
	case "liar", "refused":
		if code == 0 {
			fail("the loop completed (exit 0) although the worker wrote nothing")
		}
		if hello() || onBranch() {
			fail("out.txt landed although nobody wrote it")
		}
		want := "no_change"
		if r.scenario == "refused" {
			want = "permission_denied"
		}
		if k := finishKinds(events); !strings.Contains(k, want) {
			fail("the worker's attempt failed with kinds %q, want %s", k, want)
		}
	case "hang":
		if code == 0 {
			fail("the loop completed (exit 0) although the worker hung")
		}
		if k := finishKinds(events); !strings.Contains(k, "timeout") {
			fail("the worker's attempt failed with kinds %q, want timeout", k)
		}
		if r.agent != "exec" && !strings.Contains(r.output, fmt.Sprintf("sleep %d", r.sleep)) {
			fail("the hanging tool call was not shown as a progress line")
		}
		if pids := sleepers(r.sleep, r.dir); len(pids) > 0 {
			fail("the hanging tool's process survived the attempt: %v", pids)
		}
	}
	if r.scenario == "refused" {
		if _, err := os.Stat(r.refusedPath); err == nil {
			fail("the refused write happened: %s exists", r.refusedPath)
		}
		var found bool
		for _, ev := range events {
			path, _ := ev.Data["path"].(string)
			tool, _ := ev.Data["tool"].(string)
			why, _ := ev.Data["why"].(string)
			named := strings.Contains(path, filepath.Base(r.refusedPath))
			if r.agent == "codex" {
				// Codex logs a refused patch without its path; it says why.
				named = strings.Contains(why, "outside of the project")
			}
			if ev.Type == journal.PermissionDenied && ev.Atom == "A1" && tool != "" && named {
				found = true
			}
		}
		if !found {
			fail("no permission_denied event naming the tool and %s in the journal", filepath.Base(r.refusedPath))
		}
		if !strings.Contains(r.output, "refused") {
			fail("no progress line says the tool was refused")
		}
		st := exec.Command(r.aot, "status")
		st.Dir, st.Env = proj, env
		if so, _ := st.CombinedOutput(); !strings.Contains(string(so), "Refused tools") || r.agent != "codex" && !strings.Contains(string(so), filepath.Base(r.refusedPath)) {
			fail("aot status does not show the refusal:\n%s", so)
		}
	}
	return problems
}

// setUp makes the row's project: a git repository with one commit, the
// loop's files ignored, and the state file.
func (r *conformanceRow) setUp(proj string) error {
	if err := os.MkdirAll(filepath.Join(proj, ".claude"), 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"README.md":                 "a project\n",
		".gitignore":                ".claude/\n",
		".claude/aot-loop-state.md": conformanceState,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "user.email", "person@example.com"},
		{"config", "user.name", "A Person"},
		{"add", "README.md", ".gitignore"},
		{"commit", "-q", "-m", "first"},
	} {
		if _, err := git(proj, args...); err != nil {
			return err
		}
	}
	return nil
}

const conformanceState = `---
objective:
  goal: "Write hello to out.txt"
  base_case:
    checklist:
      - item: "out.txt says hello"
        check:
          type: command
          value: "grep -q hello out.txt"
  background_intent: "the conformance matrix"
  deliverables: "out.txt"
  definition_of_done: "out.txt says hello"
  constraints:
    max_iterations: 2
    max_parallel_agents: 1
    max_stall_count: 1
    max_attempts_per_atom: 1
control:
  status: pending
  iteration: 0
  stall_count: 0
  prev_pending_count: -1
  stop_requested: false
  stop_reason: null
  redirect_requested: false
atoms:
  - id: A1
    description: "write hello to out.txt"
    status: pending
    depends_on: []
decompositions: []
or_groups: {}
bindings: {}
trail: []
---
`

// claim is the worker's final answer in every scenario: success, out.txt.
const claim = `{"success": true, "summary": "wrote hello to out.txt", "artifacts": ["out.txt"]}`

// execCommand is the exec agent's script for the row's scenario.
func (r *conformanceRow) execCommand() string {
	answer := "echo '" + claim + "'"
	switch r.scenario {
	case "shell":
		return "echo hello > out.txt; " + answer
	case "hang":
		return fmt.Sprintf("sleep %d; %s", r.sleep, answer)
	}
	return answer // liar
}

// script is the fake model's script for the row: the worker's tool call
// for the scenario, in the CLI's own tool, then its claim.
func (r *conformanceRow) script() fakellm.Script {
	shell := map[string]string{"claude": "Bash", "codex": "exec_command", "gemini": "run_shell_command"}[r.agent]
	shellCall := func(command string) map[string]any {
		in := map[string]any{"command": command}
		switch r.agent {
		case "claude":
			in["description"] = "run"
		case "codex":
			in = map[string]any{"cmd": command}
		}
		return map[string]any{"type": "tool_use", "name": shell, "input": in}
	}
	// edit writes a file through the CLI's editing tool (Codex's is
	// apply_patch, which it runs from its shell tool).
	edit := func(file string) map[string]any {
		switch r.agent {
		case "claude":
			return map[string]any{"type": "tool_use", "name": "Write", "input": map[string]any{"file_path": file, "content": "hello\n"}}
		case "gemini":
			return map[string]any{"type": "tool_use", "name": "write_file", "input": map[string]any{"file_path": file, "content": "hello\n"}}
		}
		return shellCall("apply_patch <<'PATCH'\n*** Begin Patch\n*** Add File: " + file + "\n+hello\n*** End Patch\nPATCH\n")
	}
	var turns []any
	switch r.scenario {
	case "shell":
		turns = append(turns, []any{shellCall("echo hello > out.txt")})
	case "edit":
		turns = append(turns, []any{edit("out.txt")})
	case "refused":
		turns = append(turns, []any{edit(r.refusedPath)})
	case "hang":
		// The CLIs do not wait on a long shell command for ever (Claude
		// Code and Codex hand it back after a while, still running): the
		// hang is the model's next answer that never comes, with the
		// tool's process still alive.
		turns = append(turns, []any{shellCall(fmt.Sprintf("sleep %d", r.sleep))})
	}
	var answer map[string]any
	_ = json.Unmarshal([]byte(claim), &answer)
	final := map[string]any{"type": "final", "json": answer}
	if r.scenario == "hang" {
		turns = append(turns, map[string]any{"blocks": []any{final}, "delay_ms": 240_000})
	} else {
		turns = append(turns, []any{final})
	}
	doc := map[string]any{
		"conversations": []any{map[string]any{"match": "You are a worker", "turns": turns}},
		"default":       []any{map[string]any{"type": "text", "text": "ok"}},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	s, err := fakellm.ParseScript(data)
	if err != nil {
		panic(fmt.Sprintf("conformance script: %v", err))
	}
	return s
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func readEvents(path string) ([]journal.Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the journal: %w", err)
	}
	var out []journal.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev journal.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out, nil
}

// finishKinds lists the kinds of A1's failed worker attempts.
func finishKinds(events []journal.Event) string {
	var kinds []string
	for _, ev := range events {
		if ev.Type == journal.AtomFinish && ev.Atom == "A1" && ev.Role == "worker" && ev.OK != nil && !*ev.OK {
			k, _ := ev.Data["kind"].(string)
			kinds = append(kinds, k)
		}
	}
	return strings.Join(kinds, ",")
}

// sleepers are the live processes running `sleep n` in a folder under
// dir (another run of this test may have its own), waiting up to a second
// (a killed tree's last members may take a moment to be reaped).
func sleepers(n int, dir string) []int {
	want := "sleep\x00" + strconv.Itoa(n) + "\x00"
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	under := func(pid string) bool {
		cwd, err := os.Readlink("/proc/" + pid + "/cwd")
		return err != nil || strings.HasPrefix(cwd, dir) || strings.HasPrefix(cwd, real)
	}
	var pids []int
	for range 10 {
		pids = pids[:0]
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err == nil && strings.HasSuffix(string(cmdline), want) && under(e.Name()) && alive(pid) {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return pids
}
