package verify

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aot-loop/aot/internal/proc"
)

// outputTail is how many bytes of a command's combined output are kept.
const outputTail = 2000

// drainDelay bounds how long the output is read after the shell and its
// process tree are gone; only a descendant that escaped the kill (see
// package proc) may still hold the pipe open.
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
// timeout passes or ctx is done, the command's whole process tree is killed
// (see package proc). Background processes the command leaves behind, even
// those that left its process group, are killed as well once its shell
// exits, so a check never outlives its verdict; and the verdict does not
// wait for them to close the output.
func Command(ctx context.Context, dir, command string, expectFail bool, timeout time.Duration) CommandResult {
	return CommandTo(ctx, dir, command, expectFail, timeout, nil)
}

// CommandTo is Command that also copies the command's whole combined output
// to full (when not nil), for readers that parse it: test reports, coverage.
func CommandTo(ctx context.Context, dir, command string, expectFail bool, timeout time.Duration, full io.Writer) CommandResult {
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

	// One pipe for stdout and stderr keeps their interleaving; the tail
	// buffer keeps memory bounded however much the command prints. proc
	// reads the output itself, so the verdict comes when the shell exits,
	// however long a background child holds the pipe, and then kills the
	// command's whole process tree (group and token carriers).
	out := &tailBuffer{max: outputTail}
	var sink io.Writer = out
	if full != nil {
		sink = io.MultiWriter(out, full)
	}
	run := (&proc.Cmd{
		Script:     command,
		Dir:        dir,
		Stdout:     sink,
		Stderr:     sink,
		Timeout:    timeout,
		DrainDelay: drainDelay,
	}).Run(ctx)
	res.OutputSummary = out.String()

	ps := run.State
	switch {
	case ps == nil:
		res.Evidence = fmt.Sprintf("Command could not start: %v", run.Err)
		return res
	case run.TimedOut:
		// The deadline passed. Even if the shell exited at that very moment the
		// check is failed: it did not finish in time (and on Windows a killed
		// process looks like an ordinary exit 1).
		res.TimedOut = true
		res.Evidence = fmt.Sprintf("Command timed out after %v; its process tree was killed", timeout)
	case run.CtxErr != nil:
		res.Evidence = fmt.Sprintf("Command was stopped before it finished: %v", run.CtxErr)
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
	waitErr := run.Err
	if res.Passed && waitErr != nil {
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
