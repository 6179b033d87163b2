//go:build unix

package durable

import (
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

func TestCancelledAttemptKillsTheAgentAndRemovesItsWorktree(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	pids := filepath.Join(t.TempDir(), "pids")
	in := attemptInput(repo, seed, "C", `echo $$ > `+pids+`.tmp; sleep 300 & echo $! >> `+pids+`.tmp; mv `+pids+`.tmp `+pids+`; wait`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.Attempt(ctx, in)
		done <- err
	}()
	var running []int
	for deadline := time.Now().Add(20 * time.Second); len(running) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never started")
		}
		data, _ := os.ReadFile(pids)
		running = running[:0]
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				running = append(running, pid)
			}
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled attempt returns the cancellation, got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the attempt did not end when cancelled")
	}
	for _, pid := range running {
		if alive(pid) {
			t.Errorf("process %d of the agent survived the cancellation", pid)
		}
	}
	noWorktrees(t, a)
	if got := branchOf(t, repo, in.Branch); got != "" {
		t.Errorf("a cancelled attempt pushed %s", in.Branch)
	}
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc: trust the signal
	}
	fields := strings.Fields(string(data))
	return len(fields) < 3 || fields[2] != "Z"
}
