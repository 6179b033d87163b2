//go:build !windows

package proc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCancelKillsGrandchildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	pidFile := t.TempDir() + "/pid"
	cmd := Shell(ctx, "sleep 30 & echo $! > "+pidFile+"; wait")
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	_ = cmd.Run()
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	waitGone(t, readPid(t, pidFile))
}

// TestRunKillsBackgroundChildOnExit: the run ends when its shell exits, not
// when a background child that holds stdout does, and the child is killed.
func TestRunKillsBackgroundChildOnExit(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	c := &Cmd{Script: "sleep 1000 & echo $! > bg; echo answer", Dir: dir, Stdout: &out}
	start := time.Now()
	res := c.Run(context.Background())
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a background child held the run for %v", d)
	}
	if res.Err != nil || res.State == nil || !res.State.Success() || res.Undrained || res.KillErr != nil {
		t.Fatalf("%+v", res)
	}
	if out.String() != "answer\n" {
		t.Fatalf("stdout %q", out.String())
	}
	if Alive(res.Tree) {
		t.Fatal("tree still alive after Run returned")
	}
	assertDead(t, readPid(t, filepath.Join(dir, "bg")))
}

// TestRunTimeout: the timeout kills the whole tree and says so.
func TestRunTimeout(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	c := &Cmd{Script: "sleep 1000 & echo $! > bg; echo started; sleep 1000", Dir: dir, Stdout: &out, Timeout: 200 * time.Millisecond}
	start := time.Now()
	res := c.Run(context.Background())
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	if !res.TimedOut || res.CtxErr != nil || res.State == nil || res.State.Exited() {
		t.Fatalf("%+v", res)
	}
	if out.String() != "started\n" {
		t.Fatalf("output before the timeout was lost: %q", out.String())
	}
	if Alive(res.Tree) {
		t.Fatal("tree still alive")
	}
	assertDead(t, readPid(t, filepath.Join(dir, "bg")))
}

func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cmd{Script: "sleep 1000 & sleep 1000", OnStart: func(Tree) { cancel() }}
	start := time.Now()
	res := c.Run(ctx)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	if !errors.Is(res.CtxErr, context.Canceled) || res.TimedOut {
		t.Fatalf("%+v", res)
	}
	if Alive(res.Tree) {
		t.Fatal("tree still alive")
	}
}

// failAfter accepts n bytes, then fails.
type failAfter struct{ n int }

var errFull = errors.New("full")

func (w *failAfter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errFull
	}
	w.n -= len(p)
	return len(p), nil
}

// TestRunWriterErrorKillsTree: a writer that fails (a cap) stops an endless
// writer at once and kills its tree.
func TestRunWriterErrorKillsTree(t *testing.T) {
	c := &Cmd{Script: "sleep 1000 & yes", Stdout: &failAfter{n: 1 << 20}}
	start := time.Now()
	res := c.Run(context.Background())
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	if !errors.Is(res.WriteErr, errFull) || res.State == nil || res.State.Exited() {
		t.Fatalf("%+v", res)
	}
	if Alive(res.Tree) {
		t.Fatal("tree still alive")
	}
}

func TestRunStdinEnvAndPipes(t *testing.T) {
	var both bytes.Buffer
	c := &Cmd{
		Script: `read line; echo "in:$line"; echo err >&2; echo "env:$AOT_X:$` + TokenEnv + `"`,
		Stdin:  strings.NewReader("hello\n"),
		Env:    []string{"AOT_X=x"},
		Stdout: &both, Stderr: &both,
	}
	res := c.Run(context.Background())
	if res.Err != nil || !res.State.Success() {
		t.Fatalf("%+v", res)
	}
	if res.Tree.PGID <= 0 || len(res.Tree.Token) != 32 {
		t.Fatalf("tree %+v", res.Tree)
	}
	if want := "in:hello\nerr\nenv:x:" + res.Tree.Token + "\n"; both.String() != want {
		t.Fatalf("shared pipe got %q, want %q", both.String(), want)
	}

	var out, errb bytes.Buffer
	c = &Cmd{Script: "echo out; echo err >&2", Stdout: &out, Stderr: &errb}
	if res := c.Run(context.Background()); res.Err != nil || out.String() != "out\n" || errb.String() != "err\n" {
		t.Fatalf("%+v out %q err %q", res, out.String(), errb.String())
	}
}

// TestRunUnreadStdin: a command that does not read a large stdin neither
// blocks nor fails the run.
func TestRunUnreadStdin(t *testing.T) {
	c := &Cmd{Script: "exit 0", Stdin: bytes.NewReader(make([]byte, 4<<20))}
	start := time.Now()
	res := c.Run(context.Background())
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
	if res.Err != nil || !res.State.Success() {
		t.Fatalf("%+v", res)
	}
}

func TestRunStartError(t *testing.T) {
	called := false
	c := &Cmd{Script: "true", Dir: filepath.Join(t.TempDir(), "nope"), OnStart: func(Tree) { called = true }}
	res := c.Run(context.Background())
	if res.Err == nil || res.State != nil || !res.Tree.IsZero() || called {
		t.Fatalf("%+v, OnStart called %v", res, called)
	}
}

func TestTokens(t *testing.T) {
	env := withToken([]string{"A=1", TokenEnv + "=outer", "B=2"}, []string{"C=3"}, "inner")
	if got := strings.Join(env, " "); got != "A=1 B=2 C=3 "+TokenEnv+"=outer:inner" {
		t.Fatalf("env %q", got)
	}
	if tokenIn(env) != "inner" || !hasToken("outer:inner", "outer") || !hasToken("inner", "inner") || hasToken("outer:inner", "inn") || hasToken("x", "") {
		t.Fatal("token matching")
	}
	if KillTree(Tree{}) != nil || Alive(Tree{}) {
		t.Fatal("a zero tree is nothing")
	}
	// Never our own group, never every process.
	if Alive(Tree{PGID: syscall.Getpgrp()}) || Alive(Tree{PGID: 1}) {
		t.Fatal("our own group or pid 1 must not count")
	}
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// assertDead fails unless pid is dead now (a zombie counts as dead).
func assertDead(t *testing.T, pid int) {
	t.Helper()
	if syscall.Kill(pid, 0) == nil && !isZombie(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("process %d is alive", pid)
	}
}

// waitGone fails unless pid ends within a few seconds.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && !isZombie(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d survived", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
