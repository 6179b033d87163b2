package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/proc"
)

// Process is one run of an agent CLI: its stdout is a stream of lines
// (JSONL events) handed to OnLine as they arrive and copied to the log,
// its stderr goes to the log. Its whole process tree dies when the run
// ends (see package proc).
type Process struct {
	Bin     string
	Args    []string
	Env     []string // added to aot's environment
	Dir     string
	Stdin   []byte // the prompt, when the CLI reads it from stdin
	Timeout time.Duration
	Log     io.Writer
	// OnLine gets each complete stdout line, without its newline.
	OnLine func(line []byte)
	// OwnSandbox says the CLI confines the commands it runs itself, with
	// bubblewrap (Codex), which cannot set up its mounts inside a Landlock
	// domain: its attempts run under the guard without Landlock.
	OwnSandbox bool
}

// ProcessResult is how a CLI run ended.
type ProcessResult struct {
	proc.Result
	Stdout  []byte // all of stdout, at most maxStdout
	Stderr  []byte // the last maxStderrTail bytes of stderr
	Elapsed time.Duration
}

const (
	maxStdout     = 16 << 20
	maxStderrTail = 8 << 10
)

// Run runs p. It never returns before the tree is dead.
func (p *Process) Run(ctx context.Context) ProcessResult {
	log := p.Log
	if log == nil {
		log = io.Discard
	}
	// stdout and stderr are read on goroutines of their own.
	log = &lockedWriter{w: log}
	out := &lineWriter{log: log, onLine: p.OnLine}
	errw := &tailWriter{log: log}
	script := "exec " + shellQuote(p.Bin)
	for _, a := range p.Args {
		script += " " + shellQuote(a)
	}
	guard := confine.From(ctx)
	if p.OwnSandbox {
		guard = guard.WithoutLandlock()
	}
	c := &proc.Cmd{
		Script:  script,
		Dir:     p.Dir,
		Env:     p.Env,
		Stdin:   bytes.NewReader(p.Stdin),
		Stdout:  out,
		Stderr:  errw,
		Timeout: p.Timeout,
		OnStart: agent.StartFunc(ctx),
		Guard:   guard.For(p.Dir, "", p.Env),
	}
	start := time.Now()
	res := c.Run(ctx)
	out.flush()
	return ProcessResult{Result: res, Stdout: out.all.Bytes(), Stderr: errw.tail, Elapsed: time.Since(start)}
}

// Failure classifies the ways a CLI run fails that are the same for every
// CLI: it did not start, timed out, was cancelled, wrote too much, crashed.
// nil means the CLI exited 0 and its output decides.
func (r ProcessResult) Failure() *agent.AttemptError {
	switch {
	case r.Err != nil && r.State == nil:
		return &agent.AttemptError{Kind: agent.KindCrash, Reason: fmt.Sprintf("agent did not run: %v", r.Err)}
	case r.TimedOut || errors.Is(r.CtxErr, context.DeadlineExceeded):
		return &agent.AttemptError{Kind: agent.KindTimeout, Reason: fmt.Sprintf("timed out after %s; process tree killed", r.Elapsed.Round(time.Millisecond))}
	case r.CtxErr != nil:
		return &agent.AttemptError{Kind: agent.KindCancelled, Reason: "cancelled; process tree killed"}
	case r.WriteErr != nil:
		return &agent.AttemptError{Kind: agent.KindCrash, Reason: r.WriteErr.Error()}
	case r.Err != nil:
		return &agent.AttemptError{Kind: agent.KindCrash, Reason: fmt.Sprintf("agent could not be waited for: %v", r.Err)}
	case !r.State.Success():
		return &agent.AttemptError{Kind: agent.KindCrash, Reason: fmt.Sprintf("agent exited with %s%s", r.State, r.StderrHint())}
	}
	return nil
}

// StderrHint is the last line of stderr, quoted, or "".
func (r ProcessResult) StderrHint() string { return agent.StderrHint(r.Stderr) }

// lineWriter splits stdout into lines for OnLine and the log, keeping all
// of it up to maxStdout (more fails the run, which kills the tree).
type lineWriter struct {
	log     io.Writer
	onLine  func([]byte)
	all     bytes.Buffer
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if w.all.Len()+len(p) > maxStdout {
		return 0, errors.New("agent wrote more than 16 MiB to stdout")
	}
	w.all.Write(p)
	w.log.Write(p)
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if w.onLine != nil {
			w.onLine(bytes.TrimRight(w.partial[:i], "\r"))
		}
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

// flush hands a last line without a newline to OnLine.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 && w.onLine != nil {
		w.onLine(w.partial)
	}
	w.partial = nil
}

// tailWriter copies stderr to the log (at most 16 MiB) and keeps its tail.
type tailWriter struct {
	log    io.Writer
	logged int
	tail   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	if w.logged < maxStdout {
		n := min(len(p), maxStdout-w.logged)
		w.log.Write(p[:n])
		w.logged += n
	}
	w.tail = append(w.tail, p...)
	if len(w.tail) > maxStderrTail {
		w.tail = w.tail[len(w.tail)-maxStderrTail:]
	}
	return len(p), nil
}

// lockedWriter serialises writes to the attempt's log.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// shorten trims s and cuts it to at most n runes, marking a cut with "…":
// the start of what an agent said, for a reason text or a progress line.
func shorten(s string, n int) string {
	return brief.Cut(s, n)
}

// oneLine squeezes s onto one short line.
func oneLine(s string) string { return shorten(strings.Join(strings.Fields(s), " "), 200) }

// quoteText quotes the start of what an agent said, or says it said nothing.
func quoteText(s string) string {
	if s = shorten(s, 200); s == "" {
		return "nothing"
	}
	return strconv.Quote(s)
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// openLog opens t's log through env, or discards.
// logPrompt starts an attempt's log with the prompt the agent was given,
// so that aot logs and the dashboard show what it was asked.
func logPrompt(log io.Writer, prompt string) {
	fmt.Fprintf(log, "--- prompt ---\n%s\n--- end of prompt ---\n", strings.TrimRight(prompt, "\n"))
}

func openLog(env Env, t agent.Task) (io.Writer, func()) {
	if env.Log == nil {
		return io.Discard, func() {}
	}
	w, err := env.Log(t)
	if err != nil {
		return io.Discard, func() {}
	}
	return w, func() { w.Close() }
}
