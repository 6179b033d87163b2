//go:build temporal && linux

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/state"
)

// These tests signal the pid a supervisor, a shell or a terminal holds:
// the one `aot worker` or `aot run --engine temporal` started as, aot
// built without the temporal tag, aot-temporal beside it, as make build
// lays them out.

// plainAot builds aot and aot-temporal into bin.
func plainAot(t *testing.T) func(bin string) {
	return func(bin string) {
		t.Helper()
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]string{{"-o", filepath.Join(bin, "aot")}, {"-tags", "temporal", "-o", filepath.Join(bin, "aot-temporal")}} {
			cmd := exec.Command("go", append(append([]string{"build"}, b...), "./cmd/aot")...)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build %v: %v\n%s", b, err, out)
			}
		}
	}
}

// slowAgent is an exec agent that notes "PID CHILD PWD" in ran (itself,
// a child it leaves in the background, its worktree) and works until
// gate exists (at most a minute).
func slowAgent(ran, gate string) string {
	return `sleep 120 & echo "$$ $! $PWD" >> ` + ran + `; i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; ` +
		`kill $!; echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "wrote '"$AOT_ATOM_ID"'"}'`
}

// ranLines is what the agents noted, one []string{pid, child, dir} each.
func ranLines(ran string) [][]string {
	data, _ := os.ReadFile(ran)
	var lines [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			lines = append(lines, f)
		}
	}
	return lines
}

// running says whether the process pid is alive (a zombie is not).
func running(pid string) bool {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// processesOf lists the live processes running the program exe.
func processesOf(exe string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && p == exe && running(e.Name()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// worktrees lists the activities' folders in a worker's cache, and their
// lock and note files.
func worktrees(cache string) []string {
	m, _ := filepath.Glob(filepath.Join(cache, "work", "wt-*"))
	return m
}

// folders keeps the folders of paths.
func folders(paths []string) []string {
	var dirs []string
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		}
	}
	return dirs
}

// exitOf waits at most within for cmd to end and returns its exit code.
func exitOf(t *testing.T, name string, cmd *exec.Cmd, out *lockedBuffer, within time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("%s did not end within %s:\n%s", name, within, out)
	}
	return cmd.ProcessState.ExitCode()
}

// stopWorker sends sig to a worker whose agent noted agent (see ranLines)
// and checks that it ends with exit 0, its agent's processes and its
// worktrees with it.
func stopWorker(t *testing.T, name string, sig syscall.Signal, cmd *exec.Cmd, out *lockedBuffer, agent []string, cache string) {
	t.Helper()
	cmd.Process.Signal(sig)
	if code := exitOf(t, name, cmd, out, 20*time.Second); code != 0 {
		t.Errorf("%s after %v: exit %d, want 0\n%s", name, sig, code, out)
	}
	for _, pid := range agent[:2] {
		if running(pid) {
			t.Errorf("process %s of %s's agent outlived it", pid, name)
		}
	}
	if left := worktrees(cache); len(left) != 0 {
		t.Errorf("%s left its worktrees: %v", name, left)
	}
}

// SIGINT, SIGTERM and SIGHUP sent to the pid aot started as reach the
// process that works (it is aot-temporal); aot run detaches with exit 3 and
// says so; a worker's SIGTERM kills its agents, removes their worktrees
// and hands the attempt back at once: another worker runs it within
// seconds, long before the 30 s heartbeat timeout.
func TestTemporalSignalsReachTheProcessASupervisorHolds(t *testing.T) {
	var bin string
	start := aotProcessesOf(t, func(b string) { bin = b; plainAot(t)(b) })
	aotTemporal := filepath.Join(bin, "aot-temporal")
	root, _, ws, _ := temporalProject(t, "one file", "test -f A.txt", 1, state.Atom{ID: "A", Description: "write A.txt"})
	ran, gate := filepath.Join(root, "ran.log"), filepath.Join(root, "gate")
	const queue = "signals"
	worker := func(name string) (*exec.Cmd, *lockedBuffer) {
		cmd, out := start(name, ws, "worker", "--task-queue", queue, "--cache", filepath.Join(root, "cache-"+name), "--identity", name, "--grace", "1s",
			"--agent-command", slowAgent(ran, gate))
		until(t, name+" polls", 60*time.Second, func() bool { return strings.Contains(out.String(), "polling task queue "+queue) })
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe"); err != nil || exe != aotTemporal {
			t.Fatalf("the pid aot worker started as runs %q (%v), not %s", exe, err, aotTemporal)
		}
		return cmd, out
	}
	w1, w1Out := worker("w1")
	run := []string{"run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec", "--agent-command", slowAgent(ran, gate)}
	run1, run1Out := start("aot run", ws, run...)
	until(t, "the agent runs", 90*time.Second, func() bool { return len(ranLines(ran)) == 1 })

	// aot run: SIGTERM detaches with exit 3, and says so.
	run1.Process.Signal(syscall.SIGTERM)
	if code := exitOf(t, "aot run", run1, run1Out, 20*time.Second); code != 3 {
		t.Errorf("aot run after SIGTERM: exit %d, want 3\n%s", code, run1Out)
	}
	if !strings.Contains(run1Out.String(), "detached (SIGTERM received; exit 3): the loop goes on as workflow") {
		t.Errorf("aot run did not say it detached:\n%s", run1Out)
	}

	// w1: SIGTERM; its attempt goes to w2 within seconds.
	w2, w2Out := worker("w2")
	first := ranLines(ran)[0]
	if !strings.Contains(first[2], "cache-w1") {
		t.Fatalf("the first attempt ran in %s, not on w1", first[2])
	}
	stopped := time.Now()
	stopWorker(t, "w1", syscall.SIGTERM, w1, w1Out, first, filepath.Join(root, "cache-w1"))
	until(t, "w2 retries the attempt", 15*time.Second, func() bool { return len(ranLines(ran)) == 2 })
	if took := time.Since(stopped); took > 15*time.Second {
		t.Errorf("the attempt was retried %s after w1's SIGTERM", took)
	}
	second := ranLines(ran)[1]
	if !strings.Contains(second[2], "cache-w2") {
		t.Errorf("the retry ran in %s, not on w2", second[2])
	}

	// aot run again: SIGINT (Ctrl-C) detaches with exit 3 too.
	run2, run2Out := start("aot run again", ws, run...)
	until(t, "aot run reattaches", 30*time.Second, func() bool { return strings.Contains(run2Out.String(), "reattached to workflow") })
	run2.Process.Signal(syscall.SIGINT)
	if code := exitOf(t, "aot run again", run2, run2Out, 20*time.Second); code != 3 {
		t.Errorf("aot run after SIGINT: exit %d, want 3\n%s", code, run2Out)
	}
	if !strings.Contains(run2Out.String(), "detached (SIGINT (Ctrl-C) received; exit 3)") {
		t.Errorf("aot run did not say it detached:\n%s", run2Out)
	}

	// w2: SIGHUP (its terminal closed) stops it as SIGTERM does.
	stopWorker(t, "w2", syscall.SIGHUP, w2, w2Out, second, filepath.Join(root, "cache-w2"))
	if left := processesOf(aotTemporal); len(left) != 0 {
		t.Errorf("aot-temporal processes outlived the signals: %v", left)
	}
}

// ppid is the parent of the process pid.
func ppid(t *testing.T, pid string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if len(f) < 2 {
		t.Fatalf("/proc/%s/stat: %q", pid, data)
	}
	return f[1]
}

// A worker SIGKILLed (at the pid a supervisor holds) takes its agents with
// it: each agent's guard kills its tree. Where the guard was killed too,
// the agent's orphans run on, until the next worker started on the same
// cache kills them and removes the worktrees the dead one left.
func TestTemporalWorkerRestartKillsWhatAKilledWorkerLeft(t *testing.T) {
	start := aotProcessesOf(t, plainAot(t))
	root, _, ws, _ := temporalProject(t, "two files", "test -f A.txt && test -f B.txt", 2,
		state.Atom{ID: "A", Description: "write A.txt"}, state.Atom{ID: "B", Description: "write B.txt"})
	ran, gate := filepath.Join(root, "ran.log"), filepath.Join(root, "gate")
	const queue = "sigkill"
	cache := filepath.Join(root, "cache-w1")
	worker := func(name string) (*exec.Cmd, *lockedBuffer) {
		cmd, out := start(name, ws, "worker", "--task-queue", queue, "--cache", cache, "--identity", name, "--agent-command", slowAgent(ran, gate))
		until(t, name+" polls", 60*time.Second, func() bool { return strings.Contains(out.String(), "polling task queue "+queue) })
		return cmd, out
	}
	w1, w1Out := worker("w1")
	run, runOut := start("aot run", ws, "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec", "--agent-command", slowAgent(ran, gate))
	until(t, "two agents run", 90*time.Second, func() bool { return len(ranLines(ran)) == 2 })
	agents := ranLines(ran)

	// SIGKILL to w1, and to the first agent's guard.
	guard := ppid(t, agents[0][0])
	if g, _ := strconv.Atoi(guard); g <= 1 || g == w1.Process.Pid {
		t.Fatalf("the agent's parent is %s, not a guard", guard)
	}
	syscall.Kill(w1.Process.Pid, syscall.SIGKILL)
	g, _ := strconv.Atoi(guard)
	syscall.Kill(g, syscall.SIGKILL)
	exitOf(t, "w1", w1, w1Out, 10*time.Second)
	until(t, "the second agent's guard kills its tree", 10*time.Second, func() bool {
		return !running(agents[1][0]) && !running(agents[1][1])
	})
	time.Sleep(500 * time.Millisecond)
	if !running(agents[0][1]) {
		t.Fatal("the first agent's child died with its guard: nothing is left for the restart to kill")
	}
	if left := folders(worktrees(cache)); len(left) != 2 {
		t.Fatalf("w1 left %d worktrees, want its 2: %v", len(left), left)
	}

	// The next worker on that cache kills the orphan and sweeps.
	worker("w1-again")
	if running(agents[0][1]) {
		t.Errorf("the orphan %s of the killed worker's agent survived the restart", agents[0][1])
	}
	if left := worktrees(cache); len(left) != 0 {
		t.Errorf("the restarted worker left the dead one's worktrees: %v", left)
	}
	run.Process.Signal(syscall.SIGTERM)
	exitOf(t, "aot run", run, runOut, 20*time.Second)
}
