//go:build unix

package durable

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// doomedWorker runs the test binary as a worker process of its own (see
// TestMain) polling queue; it returns the process and a channel closed
// when it has exited. The test's end kills its process group.
func doomedWorker(t *testing.T, addr, queue string, env ...string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	doomed := exec.Command(os.Args[0])
	doomed.Env = append(os.Environ(), append([]string{"AOT_TEST_WORKER_ADDRESS=" + addr, "AOT_TEST_WORKER_QUEUE=" + queue,
		"AOT_TEST_WORKER_CACHE=" + t.TempDir()}, env...)...)
	doomed.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr lockedWriter
	doomed.Stderr = &stderr
	if err := doomed.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { doomed.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-doomed.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("the doomed worker's stderr:\n%s", stderr.String())
		}
	})
	return doomed, exited
}

// gateMerges makes repo's pre-receive hook hold every push of a loop's
// integration branch by the doomed worker (its environment names
// AOT_TEST_WORKER_ADDRESS) while the gate file exists (after touching
// blocked): its merges never land, whatever becomes of its git processes,
// and, with refuse, refuse every push that makes or moves an atom's
// branch (noting it in refused). It returns the blocked and refused
// files; the gate opens when the test ends.
func gateMerges(t *testing.T, repo string, refuse bool) (blocked, refused string) {
	t.Helper()
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	blocked, refused = filepath.Join(dir, "blocked"), filepath.Join(dir, "refused")
	writeFile(t, gate, "")
	atoms := ":"
	if refuse {
		atoms = `[ "$new" = 0000000000000000000000000000000000000000 ] || { echo "$ref" >> ` + refused + `; exit 1; }`
	}
	hook := fmt.Sprintf(`#!/bin/sh
while read old new ref; do
	case "$ref" in
	refs/heads/aot/*/integration) if [ -f %[1]s ] && [ -n "$AOT_TEST_WORKER_ADDRESS" ]; then : > %[2]s; while [ -f %[1]s ]; do sleep 0.05; done; fi ;;
	refs/heads/aot/*) %[3]s ;;
	esac
done
`, gate, blocked, atoms)
	if err := os.WriteFile(filepath.Join(repo, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(gate) }) // lets a held hook end
	return blocked, refused
}

type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// countingAgent is writesItsFile that also appends its atom to ran.
func countingAgent(ran string) string {
	return writesItsFile(fmt.Sprintf(`echo "$AOT_ATOM_ID" >> %s; `, ran))
}

// runs lists the atoms whose agents ran, once per run, sorted.
func runs(t *testing.T, ran string) string {
	t.Helper()
	data, _ := os.ReadFile(ran)
	lines := strings.Fields(string(data))
	sort.Strings(lines)
	return strings.Join(lines, " ")
}

// waitForFile waits up to a minute for path to exist.
func waitForFile(t *testing.T, path, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within a minute", what)
		}
	}
}

// A worker stopped with SIGTERM while it holds its attempts' work (its
// first merge held up at the remote) pushes that work to the atoms'
// branches before it exits; another worker merges it from there: the loop
// completes with no atom run twice.
func TestAStoppedWorkersHeldWorkLandsFromItsBranches(t *testing.T) {
	addr := devServer(t)
	repo, seed := newRemote(t, map[string]string{})
	const queue = "held-stopped"
	blocked, _ := gateMerges(t, repo, false)
	ran := filepath.Join(t.TempDir(), "ran")
	doomed, exited := doomedWorker(t, addr, queue, "AOT_TEST_WORKER_GRACE=1s")
	c := dialDev(t, addr)
	start := time.Now()
	run := startLoop(t, c, queue, repo, seed, countingAgent(ran))
	waitForFile(t, blocked, "the worker's first merge")
	// A and B (the atoms that need nothing) both ran on it by now, or
	// run still; it is stopped either way.
	for deadline := time.Now().Add(30 * time.Second); runs(t, ran) != "A B"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("agents that ran: %q, want A and B", runs(t, ran))
		}
	}
	time.Sleep(300 * time.Millisecond) // their commits made and held
	if err := doomed.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not exit within 30 s of SIGTERM")
	}
	if code := doomed.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the stopped worker exited %d", code)
	}
	inProcessWorker(t, addr, queue, "survivor")
	landedOnce(t, c, run, repo, integration(run.GetID()))
	if got := runs(t, ran); got != "A B C D" {
		t.Errorf("agents that ran: %q, want each atom once", got)
	}
	t.Logf("the loop took %s", time.Since(start).Round(time.Millisecond))
}

// A worker killed while it holds its attempts' work (its first merge held
// up at the remote) takes that work with it: the merges that waited for
// it fall back to the shared queue after holderWait, find no branch, and
// those atoms run again on another worker; the loop completes, each atom
// merged once, and no atom's branch is ever pushed.
func TestAKilledWorkersHeldWorkRunsAgain(t *testing.T) {
	addr := devServer(t)
	repo, seed := newRemote(t, map[string]string{})
	const queue = "held-killed"
	blocked, refused := gateMerges(t, repo, true)
	ran := filepath.Join(t.TempDir(), "ran")
	doomed, exited := doomedWorker(t, addr, queue)
	c := dialDev(t, addr)
	start := time.Now()
	run := startLoop(t, c, queue, repo, seed, countingAgent(ran))
	waitForFile(t, blocked, "the worker's first merge")
	for deadline := time.Now().Add(30 * time.Second); runs(t, ran) != "A B"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("agents that ran: %q, want A and B", runs(t, ran))
		}
	}
	if err := syscall.Kill(-doomed.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	before := runs(t, ran)
	inProcessWorker(t, addr, queue, "survivor")
	landedOnce(t, c, run, repo, integration(run.GetID()))
	// A's and B's work, held (or merged by a push the remote never took)
	// on the killed worker, ran again.
	if got := runs(t, ran); !strings.Contains(got, "A A") || !strings.Contains(got, "B B") {
		t.Errorf("agents that ran: %q before the kill, %q in all; want A and B again after", before, got)
	}
	if data, _ := os.ReadFile(refused); len(data) > 0 {
		t.Errorf("atoms' branches were pushed:\n%s", data)
	}
	t.Logf("the loop took %s", time.Since(start).Round(time.Millisecond))
}
