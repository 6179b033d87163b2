package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/runlock"
)

// aot logs reads beside the state file: it refuses the same paths as every
// command (statepath.txtar runs it on FIFOs, sockets, devices, directories).
func init() {
	stateCommands = append(stateCommands, []string{"logs"}, []string{"logs", "A1", "--follow"})
}

// lockedBuffer is a bytes.Buffer that a test may read while a command writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// --follow prints an attempt's output while it runs, a new attempt when it
// starts, each outcome once journaled, and ends with the engine's stop.
func TestLogsFollowPrintsOutputAsItComes(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := os.MkdirAll(filepath.Dir(stateFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateFile, []byte("---\n---\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lock, err := runlock.Acquire(stateFile) // the "engine"
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	jr, err := journal.Open(journal.PathFor(stateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer jr.Close()
	logDir := filepath.Join(journal.DirFor(stateFile), "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	event := func(e journal.Event) {
		t.Helper()
		if err := jr.Append(e); err != nil {
			t.Fatal(err)
		}
		if err := jr.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	logLine := func(name, text string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(logDir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut lockedBuffer
	done := make(chan error, 1)
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				select {
				case err := <-done:
					t.Logf("logs ended: %v", err)
				default:
				}
				t.Fatalf("output lacks %q after 10s:\n%s\nstderr:\n%s", want, out.String(), errOut.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	event(journal.Event{Type: journal.RunStart})
	event(journal.Event{Type: journal.AtomStart, Atom: "A1", Role: "worker", Attempt: 1})
	logLine("A1-worker-1.log", "first line\n")

	opts := &logsOptions{IO: &streams{Out: &out, ErrOut: &errOut}, Global: &globalOptions{StateFile: stateFile}, Follow: true, Poll: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { done <- logsRun(ctx, opts) }()

	waitFor("=== A1 worker attempt 1: running\nfirst line\n")
	logLine("A1-worker-1.log", "second line\n")
	waitFor("first line\nsecond line\n")
	event(journal.Event{Type: journal.AtomStart, Atom: "B1", Role: "worker", Attempt: 1})
	logLine("B1-worker-1.log", "B1 says hi\n")
	waitFor("=== B1 worker attempt 1: running\nB1 says hi\n")
	logLine("A1-worker-1.log", "--- stdout ---\n{}\n")
	event(journal.Event{Type: journal.AtomFinish, Atom: "A1", Role: "worker", Attempt: 1, OK: journal.Bool(false), Reason: "malformed answer"})
	waitFor("=== A1 worker attempt 1\n--- stdout ---\n{}\n\n=== A1 worker attempt 1: failed: malformed answer\n")
	select {
	case err := <-done:
		t.Fatalf("follow ended before the engine stopped: %v", err)
	default:
	}
	event(journal.Event{Type: journal.AtomReset, Atom: "B1", Role: "worker", Attempt: 1, Reason: "the loop stopped: manual_stop"})
	event(journal.Event{Type: journal.Stop, Reason: "manual_stop"})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end with the engine's stop")
	}
	if !strings.HasSuffix(out.String(), "=== B1 worker attempt 1: reset: the loop stopped: manual_stop\n") {
		t.Fatalf("output does not end with B1's outcome:\n%s", out.String())
	}
}
