package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aot-loop/aot/internal/proc"
)

// outputTail is how many bytes of a command's combined output are kept.
const outputTail = 2000

// drainDelay bounds how long the output is read after the shell and its
// process group are gone; a descendant that left the group may still hold
// the pipe open.
const drainDelay = 2 * time.Second

// CommandResult is the outcome of one command or not_command check.
type CommandResult struct {
	Passed        bool   `json:"passed"`
	Type          string `json:"type"` // command or not_command
	Command       string `json:"command"`
	ExitCode      *int   `json:"exit_code"` // nil when the command was killed or never started
	Evidence      string `json:"evidence"`
	OutputSummary string `json:"output_summary"` // the tail of stdout and stderr together, valid UTF-8
	TimedOut      bool   `json:"timed_out,omitempty"`
}

// Command runs command through the shell in dir, with empty stdin, and
// judges its exit. It passes on exit 0; with expectFail (a not_command check)
// it passes only on a normal non-zero exit that shows the command ran: not a
// missing or non-executable command, not a signal, not a timeout. When the
// timeout passes or ctx is done, the command's whole process group is killed.
// Background processes the command leaves behind are killed as well once its
// shell exits, so a check never outlives its verdict.
func Command(ctx context.Context, dir, command string, expectFail bool, timeout time.Duration) CommandResult {
	res := CommandResult{Type: "command", Command: command}
	if expectFail {
		res.Type = "not_command"
	}
	if strings.TrimSpace(command) == "" {
		res.Evidence = "No command to run: an empty command verifies nothing"
		return res
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}

	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := proc.Shell(runCtx, command)
	cmd.Dir = dir
	// One pipe for stdout and stderr keeps their interleaving. Handing the
	// child an *os.File (not a Writer) means Wait returns as soon as the shell
	// exits, instead of waiting for every descendant to close the pipe.
	pr, pw, err := os.Pipe()
	if err != nil {
		res.Evidence = fmt.Sprintf("Command could not start: %v", err)
		return res
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		res.Evidence = fmt.Sprintf("Command could not start: %v", err)
		return res
	}
	out := &tailBuffer{max: outputTail}
	drained := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, pr)
		close(drained)
	}()

	waitErr := cmd.Wait()
	// Read the contexts before draining, which can take a while.
	runErr, parentErr := runCtx.Err(), ctx.Err()
	// Kill whatever the command left running in its group.
	_ = proc.Kill(cmd)
	select {
	case <-drained:
	case <-time.After(drainDelay):
	}
	pr.Close()
	<-drained
	res.OutputSummary = out.String()

	ps := cmd.ProcessState
	switch {
	case runErr != nil && parentErr == nil:
		// The deadline passed. Even if the shell exited at that very moment the
		// check is failed: it did not finish in time (and on Windows a killed
		// process looks like an ordinary exit 1).
		res.TimedOut = true
		res.Evidence = fmt.Sprintf("Command timed out after %v; its process group was killed", timeout)
	case parentErr != nil:
		res.Evidence = fmt.Sprintf("Command was stopped before it finished: %v", parentErr)
	case ps == nil:
		res.Evidence = fmt.Sprintf("Command failed to run: %v", waitErr)
	case !ps.Exited():
		res.Evidence = fmt.Sprintf("Command was killed (%v)", ps)
	default:
		code := ps.ExitCode()
		res.ExitCode = &code
		res.Passed, res.Evidence = judgeExit(code, expectFail)
	}
	if !res.Passed && res.ExitCode == nil && expectFail {
		res.Evidence += "; a not_command check needs the command to run and exit non-zero by itself"
	}
	var exitErr *exec.ExitError
	if res.Passed && waitErr != nil && !errors.As(waitErr, &exitErr) {
		// An I/O failure around a successful exit must not pass silently.
		res.Passed = false
		res.Evidence = fmt.Sprintf("Command exited with code %d but could not be observed: %v", ps.ExitCode(), waitErr)
	}
	return res
}

// judgeExit decides a command that exited by itself with code.
func judgeExit(code int, expectFail bool) (bool, string) {
	if !expectFail {
		if code == 0 {
			return true, "Command exited with code 0 (success)"
		}
		return false, fmt.Sprintf("Command exited with code %d (failure)", code)
	}
	switch {
	case code == 0:
		return false, "Command exited with code 0 (expected failure)"
	case code == 127 || (runtime.GOOS == "windows" && code == 9009):
		return false, fmt.Sprintf("Command exited with code %d: command not found, so the negative check proves nothing", code)
	case code == 126:
		return false, "Command exited with code 126: command not executable, so the negative check proves nothing"
	case code > 128 && code < 128+65 && runtime.GOOS != "windows":
		// The shell reports a child killed by signal N as 128+N.
		return false, fmt.Sprintf("Command exited with code %d: a child was killed by signal %d, so the negative check proves nothing", code, code-128)
	}
	return true, fmt.Sprintf("Command exited with code %d (expected non-zero)", code)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf       []byte
	max       int
	truncated bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.truncated = t.truncated || len(t.buf) > 0 || len(p) > t.max
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.truncated = true
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return n, nil
}

// String returns the kept bytes as valid UTF-8: a rune cut in half by the
// truncation is dropped and any other invalid byte is replaced.
func (t *tailBuffer) String() string {
	b := t.buf
	if t.truncated {
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
