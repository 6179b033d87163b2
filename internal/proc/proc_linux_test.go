//go:build linux

package proc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	switch os.Getenv("AOT_PROC_TEST_HELPER") {
	case "crash":
		crashHelper(nil)
	case "crash-guarded":
		crashHelper(testGuard())
	case "guard":
		// The test binary as a guard: its arguments after -test.run are
		// the command.
		os.Exit(Supervise(os.NewFile(LifelineFD, "lifeline"), os.Args[2:]))
	}
	os.Exit(m.Run())
}

// testGuard runs this test binary as the guard.
func testGuard() *Guard {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return &Guard{Path: exe, Args: []string{exe, "-test.run=^$"}}
}

// crashHelper plays an engine that starts an attempt and then is killed: it
// prints the tree as JSON, then the attempt's output, and waits forever.
func crashHelper(g *Guard) {
	c := &Cmd{
		Script:  `setsid sleep 1000 & echo "sid $!"; sleep 1000 & echo "bg $!"; (sleep 1000 & echo "dbl $!"); echo "sh $$"; echo ready; sleep 1000`,
		Stdout:  os.Stdout,
		OnStart: func(t Tree) { _ = json.NewEncoder(os.Stdout).Encode(t) },
		Guard:   g,
		Env:     []string{"AOT_PROC_TEST_HELPER=guard"},
	}
	c.Run(context.Background())
	os.Exit(3)
}

// TestRunKillsEscapedDescendants: children that left the process group (setsid)
// or were orphaned by a double fork still carry the token, are killed when
// the shell exits, and, adopted by this subreaper, are reaped.
func TestRunKillsEscapedDescendants(t *testing.T) {
	dir := t.TempDir()
	c := &Cmd{
		Script: `setsid sleep 1000 & echo $! > sid; (sleep 1000 & echo $! > dbl) ; (sleep 1000 &) & env -i /bin/sleep 1000 & echo $! > noenv; echo answer`,
		Dir:    dir,
	}
	start := time.Now()
	res := c.Run(context.Background())
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
	if res.Err != nil || !res.State.Success() || res.KillErr != nil || res.Undrained {
		t.Fatalf("%+v", res)
	}
	if Alive(res.Tree) {
		t.Fatal("tree still alive")
	}
	for _, f := range []string{"sid", "dbl", "noenv"} {
		pid := readPid(t, filepath.Join(dir, f))
		assertDead(t, pid)
		// Reparented to us and killed: reaped, not left as a zombie.
		if isZombie(pid) {
			if st, err := readStat(pid); err == nil && st.ppid == os.Getpid() {
				t.Errorf("%s (pid %d) was left as our zombie", f, pid)
			}
		}
	}
}

// TestKillTreeAfterCrash: the engine that started an attempt is SIGKILLed;
// its shell dies with it (Pdeathsig) but its descendants survive, and a
// different process (this test) kills them all with KillTree.
func TestKillTreeAfterCrash(t *testing.T) {
	tree, pids, crash := startCrashHelper(t, "crash")
	delete(pids, "sh") // it leads the group, checked below
	crash()
	waitGone(t, tree.PGID) // the shell died with its parent
	if !Alive(tree) {
		t.Fatal("the descendants should have survived the crash")
	}
	for name, pid := range pids {
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("%s (pid %d) did not survive the crash; the test proves nothing", name, pid)
		}
	}
	if err := KillTree(tree); err != nil {
		t.Fatal(err)
	}
	if Alive(tree) {
		t.Fatal("KillTree left processes alive")
	}
	for name, pid := range pids {
		if syscall.Kill(pid, 0) == nil && !isZombie(pid) {
			t.Errorf("%s (pid %d) survived KillTree", name, pid)
		}
	}
}

// TestGuardKillsTreeWhenStarterDies: under a guard, the SIGKILL of the
// process that started an attempt ends the whole tree within 2 seconds,
// nobody else killing it: the shell, its background child, a setsid child
// and a double-forked one, and the guard itself.
func TestGuardKillsTreeWhenStarterDies(t *testing.T) {
	tree, pids, crash := startCrashHelper(t, "crash-guarded")
	if pids["sh"] == tree.PGID {
		t.Fatal("the shell leads the group: the guard did not run")
	}
	for name, pid := range pids {
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("%s (pid %d) is not running before the crash", name, pid)
		}
	}
	crash()
	deadline := time.Now().Add(2 * time.Second)
	for Alive(tree) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if Alive(tree) {
		t.Fatal("the tree outlived its starter by 2s")
	}
	for name, pid := range pids {
		if syscall.Kill(pid, 0) == nil && !isZombie(pid) {
			t.Errorf("%s (pid %d) survived", name, pid)
		}
	}
	if syscall.Kill(tree.PGID, 0) == nil && !isZombie(tree.PGID) {
		t.Errorf("the guard (pid %d) survived", tree.PGID)
	}
}

// TestGuardedRun: under a guard, a run behaves as without one: stdin,
// stdout, stderr, the environment, the exit code, a signal that ended the
// shell, the timeout that kills the tree; and the guard leads the group.
func TestGuardedRun(t *testing.T) {
	var out, errOut strings.Builder
	res := (&Cmd{
		Script: `read x; echo "got $x $AOT_PROC_TEST_HELPER"; echo oops >&2; echo "pgid $(ps -o pgid= $$)"; exit 7`,
		Env:    []string{"AOT_PROC_TEST_HELPER=guard"},
		Stdin:  strings.NewReader("hello\n"),
		Stdout: &out, Stderr: &errOut,
		Guard: testGuard(),
	}).Run(context.Background())
	if res.Err != nil || res.State == nil || res.State.ExitCode() != 7 {
		t.Fatalf("%+v", res)
	}
	if !strings.HasPrefix(out.String(), "got hello guard\n") || errOut.String() != "oops\n" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
	}
	if want := fmt.Sprintf("pgid %d\n", res.Tree.PGID); !strings.Contains(strings.ReplaceAll(out.String(), "pgid  ", "pgid "), want) {
		t.Errorf("stdout %q: the shell is not in the group %d", out.String(), res.Tree.PGID)
	}

	res = (&Cmd{Script: `kill -9 $$`, Env: []string{"AOT_PROC_TEST_HELPER=guard"}, Guard: testGuard()}).Run(context.Background())
	if res.State == nil || res.State.String() != "signal: killed" {
		t.Fatalf("a shell killed by SIGKILL: %+v", res)
	}

	dir := t.TempDir()
	start := time.Now()
	res = (&Cmd{
		Script:  `sleep 1000 & echo $! > bg; setsid sleep 1000 & echo $! > sid; sleep 1000`,
		Dir:     dir,
		Env:     []string{"AOT_PROC_TEST_HELPER=guard"},
		Timeout: 300 * time.Millisecond,
		Guard:   testGuard(),
	}).Run(context.Background())
	if !res.TimedOut || time.Since(start) > 3*time.Second || Alive(res.Tree) {
		t.Fatalf("%+v after %v", res, time.Since(start))
	}
	for _, f := range []string{"bg", "sid"} {
		assertDead(t, readPid(t, filepath.Join(dir, f)))
	}
}

// startCrashHelper starts the crash helper in mode, reads the tree it
// started and its processes, and returns crash, which SIGKILLs the helper.
// Whatever happens, the processes are killed when the test ends.
func startCrashHelper(t *testing.T, mode string) (Tree, map[string]int, func()) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(exe, "-test.run=^$")
	helper.Env = append(os.Environ(), "AOT_PROC_TEST_HELPER="+mode)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("helper ended early")
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("helper is silent")
		}
		return ""
	}
	var tree Tree
	if err := json.Unmarshal([]byte(next()), &tree); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for l := next(); l != "ready"; l = next() {
		var name string
		var pid int
		if _, err := fmt.Sscan(l, &name, &pid); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		pids[name] = pid
	}
	t.Cleanup(func() { // whatever happens, leave nothing behind
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = KillTree(tree)
	})
	return tree, pids, func() {
		_ = helper.Process.Kill()
		_ = helper.Wait()
	}
}

// TestKillTreeSparesUnrelatedGroup: a journaled PGID now used by a group
// that carries no token (pid reuse) is not signalled.
func TestKillTreeSparesUnrelatedGroup(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	tree := Tree{PGID: cmd.Process.Pid, Token: NewToken()}
	if err := KillTree(tree); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil || isZombie(cmd.Process.Pid) {
		t.Fatal("KillTree killed a group that does not carry its token")
	}
}

// TestKillTreeGroupMemberWithoutToken: while a token carrier is still in the
// group, members that cleared their environment are killed with the group.
func TestKillTreeGroupMemberWithoutToken(t *testing.T) {
	dir := t.TempDir()
	token := NewToken()
	cmd := exec.Command("/bin/sh", "-c", "env -i /bin/sleep 1000 & echo $! > noenv; echo ready; exec sleep 1000")
	cmd.Dir = dir
	cmd.Env = withToken(nil, nil, token)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	noenv := readPid(t, filepath.Join(dir, "noenv"))
	defer syscall.Kill(noenv, syscall.SIGKILL)
	if err := KillTree(Tree{PGID: cmd.Process.Pid, Token: token}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cmd.Process.Pid)
	waitGone(t, noenv)
}

func TestReadStat(t *testing.T) {
	p, err := readStat(os.Getpid())
	if err != nil || p.pid != os.Getpid() || p.ppid != os.Getppid() || p.pgid != syscall.Getpgrp() || p.start == 0 {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := readStat(-1); err == nil {
		t.Fatal("no such process")
	}
	_ = strconv.Itoa
}
