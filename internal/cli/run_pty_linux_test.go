//go:build linux

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aot-loop/aot/internal/state"
)

// The test binary is aot itself when AOT_TEST_AS_AOT is set: a test can run
// it under a terminal of its own.
func init() {
	if os.Getenv("AOT_TEST_AS_AOT") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// openPTY opens a pseudo-terminal: the controlling side and the terminal.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		ptmx.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		ptmx.Close()
		t.Skipf("ptsname: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		ptmx.Close()
		t.Skipf("open the terminal: %v", err)
	}
	return ptmx, tty
}

// On a terminal, aot run's progress arrives while the loop runs, not at
// its end: the agent here waits until the test has seen its start line.
func TestRunShowsLiveProgressOnATerminal(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs a POSIX shell")
	}
	dir := t.TempDir()
	obj := state.Objective{
		Goal: "g", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "done.txt exists",
		BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "test -f done.txt"}},
	}
	s := state.New(obj, []state.Atom{{ID: "A1", Description: "wait for the test", DependsOn: []string{}}}, "p")
	stateFile := filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := state.NewStore(stateFile).Create(s, false); err != nil {
		t.Fatal(err)
	}
	// The worker waits for the file go (at most 30s, so that a failed test
	// leaves no process behind).
	agentScript := `case "$AOT_ROLE" in
worker) n=0; while [ ! -f go ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done
  touch done.txt; echo '{"success": true, "summary": "done"}' ;;
*) echo '{"feasible": true, "atoms": [], "passed": true}' ;;
esac`
	if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte(agentScript), 0o644); err != nil {
		t.Fatal(err)
	}

	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	cmd := exec.Command(os.Args[0], "run", "--agent-command", "sh agent.sh", "--state-file", stateFile)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AOT_TEST_AS_AOT=1", "NO_COLOR=1", "AOT_STATE_FILE=")
	cmd.Stdin, cmd.Stdout = tty, tty
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it now; its exit ends the reads below
	var screen lockedBuffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				return // EIO once the terminal's last holder is gone
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ended := false
	defer func() {
		if !ended {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	deadline := time.After(20 * time.Second)
	for !strings.Contains(screen.String(), "worker A1 started (attempt 1)") {
		select {
		case err := <-exited:
			ended = true
			t.Fatalf("aot run ended (%v) before its progress showed on the terminal:\n%s\nstderr:\n%s", err, screen.String(), stderr.String())
		case <-deadline:
			t.Fatalf("no progress on the terminal within 20s:\n%s\nstderr:\n%s", screen.String(), stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		ended = true
		if err != nil {
			t.Fatalf("aot run: %v\n%s\nstderr:\n%s", err, screen.String(), stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("aot run did not end:\n%s", screen.String())
	}
	select {
	case <-readDone:
	case <-time.After(5 * time.Second):
	}
	out := strings.ReplaceAll(screen.String(), "\r\n", "\n")
	for _, want := range []string{"worker A1 resolved in", "base case passed", "\ncompleted (completed): the base case passed\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, out)
		}
	}
}
