package durable

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/proc"
)

// An agent tree noted by an activity whose worker died (its folder's lock
// free) is killed by the next sweep of the cache, its folder and note
// removed; a noted process group whose processes no longer carry the
// tree's token (its pid reused by another program) is left alone.
func TestSweepKillsTheAgentsADeadWorkerLeft(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	c, err := a.openClone(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := a.newScratch(context.Background(), c, seed)
	if err != nil {
		t.Fatal(err)
	}
	// The agent: a shell and a child in the background, noted as an
	// attempt's agent is.
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx := dead.noteTrees(context.Background())
	ran := make(chan proc.Result, 1)
	go func() {
		cmd := &proc.Cmd{Script: "sleep 300 & echo $! > " + pidFile + "; wait", OnStart: agent.StartFunc(ctx)}
		ran <- cmd.Run(context.Background())
	}()
	var child string
	for deadline := time.Now().Add(10 * time.Second); child == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never started")
		}
		data, _ := os.ReadFile(pidFile)
		child = strings.TrimSpace(string(data))
	}

	// Another dead activity's note names the group of a process that is
	// not the agent's (no token): its pid was reused.
	other := exec.Command("sleep", "300")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	reused, err := a.newScratch(context.Background(), c, seed)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(proc.Tree{PGID: other.Process.Pid, Token: proc.NewToken()})
	if err := os.WriteFile(treesPath(reused.dir), append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}

	dead.lock.Unlock() // as when their worker died
	reused.lock.Unlock()
	if n := a.sweep(context.Background()); n != 2 {
		t.Errorf("sweep removed %d folders, want 2", n)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the dead worker's agent still runs after the sweep")
	}
	if isRunning(child) {
		t.Errorf("the agent's child %s survived the sweep", child)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the sweep killed a process that was not the agent's: %v", err)
	}
	for _, dir := range []string{dead.dir, reused.dir} {
		if _, err := os.Stat(treesPath(dir)); err == nil {
			t.Errorf("%s is still there", treesPath(dir))
		}
	}
	noWorktrees(t, a)
}
