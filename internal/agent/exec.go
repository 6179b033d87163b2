package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/proc"
)

// Exec runs a command for every task: the task as JSON on stdin, the answer
// as one JSON document on stdout, stderr to the attempt's log.
//
// The attempt ends when the agent's own process (the shell running Command)
// exits, or its timeout passes, or ctx is done, or it writes more than 16 MiB
// to stdout. Then its whole process tree is killed (see package proc):
// background children cannot keep the attempt alive by holding stdout, nor
// outlive it. The environment carries AOT_ROLE, AOT_ATOM_ID, AOT_STATE_FILE,
// AOT_ATTEMPT, AOT_USAGE_FILE (see UsageFileEnv) and proc.TokenEnv.
type Exec struct {
	Command string
	Timeout time.Duration // per attempt; 0 = no limit beyond ctx
	// Log, when set, returns where an attempt's log goes: its stderr (at
	// most 16 MiB) while it runs, then a line "--- stdout ---" and the first
	// 64 KiB of its stdout.
	Log func(t Task) (io.WriteCloser, error)
}

const (
	// maxAnswer bounds what is read from an agent's stdout.
	maxAnswer = 16 << 20
	// maxStderr bounds what of an agent's stderr reaches its log.
	maxStderr = 16 << 20
	// maxLoggedStdout bounds the copy of stdout in the log.
	maxLoggedStdout = 64 << 10
	// maxQuoted bounds the start of stdout quoted by a malformed answer.
	maxQuoted = 200
)

// errTooMuchOutput fails the stdout writer once the cap is passed.
var errTooMuchOutput = errors.New("agent wrote more than 16 MiB to stdout")

// Run runs one attempt. A failed attempt is an *AttemptError carrying
// whatever usage the attempt reported.
func (e *Exec) Run(ctx context.Context, t Task) (Result, error) {
	if strings.TrimSpace(e.Command) == "" {
		return Result{}, &AttemptError{Reason: "no agent command configured"}
	}
	input, err := json.Marshal(t)
	if err != nil {
		return Result{}, fmt.Errorf("encode task: %w", err)
	}
	usageFile, err := os.CreateTemp("", "aot-usage-*.jsonl")
	if err != nil {
		return Result{}, &AttemptError{Reason: fmt.Sprintf("agent did not run: create its usage file: %v", err)}
	}
	usagePath := usageFile.Name()
	usageFile.Close()
	defer os.Remove(usagePath)

	var log io.Writer = io.Discard
	if e.Log != nil {
		if w, err := e.Log(t); err == nil {
			defer w.Close()
			log = w
		}
	}
	stdout := &capBuffer{max: maxAnswer}
	stderr := &truncWriter{w: log, max: maxStderr}
	env := []string{
		"AOT_ROLE=" + string(t.Role),
		"AOT_ATOM_ID=" + t.Atom.ID,
		"AOT_STATE_FILE=" + t.StateFile,
		"AOT_ATTEMPT=" + strconv.Itoa(t.Attempt),
		UsageFileEnv + "=" + usagePath,
	}
	c := &proc.Cmd{
		Script:  e.Command,
		Dir:     t.Workdir,
		Env:     env,
		Stdin:   bytes.NewReader(input),
		Stdout:  stdout,
		Stderr:  stderr,
		Timeout: e.Timeout,
		OnStart: startFunc(ctx),
		Guard:   confine.From(ctx).For(t.Workdir, t.StateFile, env),
	}
	start := time.Now()
	res := c.Run(ctx)
	elapsed := time.Since(start)
	logStdout(log, stdout)

	// The tree is dead: nobody appends to the usage file any more.
	usage := readUsageFile(usagePath)
	fail := func(reason string) (Result, error) {
		u := usage
		if !u.Known {
			u = usageInOutput(stdout.buf)
		}
		kind := KindCrash
		switch {
		case strings.HasPrefix(reason, "timed out"):
			kind = KindTimeout
		case strings.HasPrefix(reason, "cancelled"):
			kind = KindCancelled
		case strings.HasPrefix(reason, "malformed answer"):
			kind = KindMalformed
		}
		return Result{}, &AttemptError{Reason: reason, Usage: u, Kind: kind}
	}

	switch {
	case res.Err != nil && res.State == nil:
		return fail(fmt.Sprintf("agent did not run: %v", res.Err))
	case res.TimedOut || errors.Is(res.CtxErr, context.DeadlineExceeded):
		return fail(fmt.Sprintf("timed out after %s; process tree killed", elapsed.Round(time.Millisecond)))
	case res.CtxErr != nil:
		return fail("cancelled; process tree killed")
	case res.WriteErr != nil:
		return fail(res.WriteErr.Error())
	case res.Err != nil:
		return fail(fmt.Sprintf("agent could not be waited for: %v", res.Err))
	case !res.State.Success():
		return fail(fmt.Sprintf("agent exited with %s%s", res.State, StderrHint(stderr.tail)))
	}
	answer := bytes.TrimSpace(stdout.buf)
	if len(answer) == 0 {
		return fail(MalformedReason(t.Role, ErrNoJSON, ""))
	}
	r, err := Decode(t.Role, answer)
	if err != nil {
		return fail(MalformedReason(t.Role, err, string(stdout.buf)))
	}
	if usage.Known {
		r.Usage = usage
	}
	if cut := Fit(&Result{Summary: r.Summary, Findings: r.Findings, Evidence: r.Evidence}); len(cut) > 0 && len(stdout.buf) > maxLoggedStdout {
		// The state file will keep the start of a long text (the engine
		// cuts it); the log keeps all of it.
		fmt.Fprintf(log, "--- the whole answer (%s) ---\n%s\n", strings.Join(cut, "; "), bytes.TrimSpace(stdout.buf))
	}
	return r, nil
}

// logStdout appends the start of stdout to the attempt's log.
func logStdout(log io.Writer, out *capBuffer) {
	b := out.buf
	cut := len(b) > maxLoggedStdout
	if cut {
		b = b[:maxLoggedStdout]
	}
	var w bytes.Buffer
	w.WriteString("--- stdout ---\n")
	w.Write(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		w.WriteByte('\n')
	}
	if cut || out.over {
		total := strconv.Itoa(len(out.buf)) + " bytes"
		if out.over {
			total = "more than " + strconv.Itoa(out.max) + " bytes"
		}
		fmt.Fprintf(&w, "--- stdout truncated: first %d of %s ---\n", maxLoggedStdout, total)
	}
	_, _ = log.Write(w.Bytes())
}

// capBuffer keeps what is written to it until max bytes; a write that would
// pass max fails, which makes proc kill the tree at once.
type capBuffer struct {
	buf  []byte
	max  int
	over bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	if len(b.buf)+len(p) > b.max {
		b.over = true
		return 0, errTooMuchOutput
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// StderrHint is the last line of an agent's stderr tail, quoted after
// "; its stderr ends: ", or "" when it wrote nothing: why a failed agent
// failed, in its own words (a denied write, a missing tool).
func StderrHint(tail []byte) string {
	s := strings.TrimSpace(string(tail))
	if s == "" {
		return ""
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	s = brief.Cut(s, 300)
	return fmt.Sprintf("; its stderr ends: %q", s)
}

// maxStderrTail bounds the end of stderr kept for StderrHint.
const maxStderrTail = 8 << 10

// truncWriter passes the first max bytes to w, then a marker, then drops
// the rest (without failing: a chatty stderr does not end an attempt). It
// keeps the last maxStderrTail bytes in tail.
type truncWriter struct {
	w    io.Writer
	max  int
	n    int
	done bool
	tail []byte
}

func (t *truncWriter) Write(p []byte) (int, error) {
	t.tail = append(t.tail, p...)
	if len(t.tail) > maxStderrTail {
		t.tail = t.tail[len(t.tail)-maxStderrTail:]
	}
	if t.done {
		return len(p), nil
	}
	if room := t.max - t.n; len(p) > room {
		t.done = true
		_, _ = t.w.Write(p[:room])
		fmt.Fprintf(t.w, "\n--- stderr truncated after %d bytes ---\n", t.max)
		return len(p), nil
	}
	t.n += len(p)
	_, _ = t.w.Write(p)
	return len(p), nil
}
