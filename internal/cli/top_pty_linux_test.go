//go:build linux

package cli

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"golang.org/x/sys/unix"

	"github.com/aot-loop/aot/internal/state"
)

// aot top in an 80x24 terminal beside a real aot run: it shows the running
// atom with its agent's output, then the atom resolved and the loop
// completed, and q ends it with 0.
func TestTopShowsTheRunningLoopAndUpdates(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs a POSIX shell")
	}
	dir := t.TempDir()
	obj := state.Objective{
		Goal: "watch me", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "done.txt exists",
		BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "test -f done.txt"}},
	}
	s := state.New(obj, []state.Atom{{ID: "SLOW1", Description: "wait for the test", DependsOn: []string{}}}, "p")
	stateFile := filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := state.NewStore(stateFile).Create(s, false); err != nil {
		t.Fatal(err)
	}
	// The worker says what it does, then waits for the file go (at most
	// 30s, so that a failed test leaves no process behind).
	agentScript := `case "$AOT_ROLE" in
worker) echo "busy-with-$AOT_ATOM_ID" >&2
  n=0; while [ ! -f go ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done
  touch done.txt; echo '{"success": true, "summary": "done"}' ;;
*) echo '{"feasible": true, "atoms": [], "passed": true}' ;;
esac`
	if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte(agentScript), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "AOT_TEST_AS_AOT=1", "NO_COLOR=1", "AOT_STATE_FILE=", "TERM=xterm-256color")

	run := exec.Command(os.Args[0], "run", "--agent-command", "sh agent.sh", "--state-file", stateFile)
	run.Dir = dir
	run.Env = env
	var runOut lockedBuffer
	run.Stdout, run.Stderr = &runOut, &runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	runExited := make(chan error, 1)
	go func() { runExited <- run.Wait() }()
	defer func() {
		_ = os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		select {
		case <-runExited:
		case <-time.After(10 * time.Second):
			_ = run.Process.Kill()
			<-runExited
		}
	}()

	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	top := exec.Command(os.Args[0], "top", "--state-file", stateFile, "--interval", "50ms")
	top.Dir = dir
	top.Env = env
	top.Stdin, top.Stdout = tty, tty
	var stderr lockedBuffer
	top.Stderr = &stderr
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	term := newVirtualTerminal(ptmx, 80, 24)
	topExited := make(chan error, 1)
	go func() { topExited <- top.Wait() }()
	ended := false
	defer func() {
		if !ended {
			_ = top.Process.Kill()
			<-topExited
		}
	}()
	waitFor := func(what string, want ...string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			screen := term.screen()
			all := true
			for _, w := range want {
				all = all && strings.Contains(screen, w)
			}
			if all {
				t.Logf("the screen showing %s:\n%s", what, screen)
				return
			}
			select {
			case err := <-topExited:
				ended = true
				t.Fatalf("aot top ended (%v) before it showed %s:\n%s\nstderr:\n%s", err, what, screen, stderr.String())
			case <-deadline:
				t.Fatalf("aot top did not show %s within 20s (%q):\n%s\nstderr:\n%s\naot run:\n%s", what, want, screen, stderr.String(), runOut.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	waitFor("the running atom and its agent's output", "SLOW1", "worker #1", "busy-with-SLOW1", "Running (1)", "running  SLOW1")
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("the atom resolved and the loop completed", "Loop  completed", "resolved SLOW1", "no agent is running", "✓")
	select {
	case err := <-runExited:
		runExited <- err
		if err != nil {
			t.Errorf("aot run: %v\n%s", err, runOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("aot run did not end")
	}
	if _, err := ptmx.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-topExited:
		ended = true
		if err != nil {
			t.Fatalf("aot top after q: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("aot top did not end on q:\n%s", term.screen())
	}
}

// virtualTerminal is the screen of a pseudo-terminal as a person would see
// it: what the program writes, escapes and all, drawn by a terminal
// emulator, whose answers to the program's queries go back to it.
type virtualTerminal struct {
	mu  sync.Mutex
	emu *vt.Emulator
}

func newVirtualTerminal(ptmx *os.File, width, height int) *virtualTerminal {
	v := &virtualTerminal{emu: vt.NewEmulator(width, height)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			v.mu.Lock()
			_, _ = v.emu.Write(buf[:n])
			v.mu.Unlock()
			if err != nil {
				return // EIO once the terminal's last holder is gone
			}
		}
	}()
	// The emulator's answers wait in a pipe until read: they go back to the
	// program. (Closing the emulator while this reads is a race in vt, so
	// this goroutine outlives the test, blocked on an empty pipe.)
	go func() { _, _ = io.Copy(ptmx, v.emu) }()
	return v
}

// screen is the text on the screen now.
func (v *virtualTerminal) screen() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.emu.String()
}
