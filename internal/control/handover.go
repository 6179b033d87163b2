package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aot-loop/aot/internal/engine"
)

// The hand-over: plain aot has no Temporal SDK (it would slow every
// command), so it reaches a loop's workflow through aot-temporal, one
// process per call. aot writes a Request to the process's stdin and reads
// an Answer from its stdout: what to do, then a Code that says how it went,
// so a failure the caller tells apart (a refused change, no worker) keeps
// its type across the two processes.

// Op is what a Request asks of the workflow: one Workflows method.
type Op string

const (
	OpSync     Op = "sync"
	OpPause    Op = "pause"
	OpResume   Op = "resume"
	OpStop     Op = "stop"
	OpRedirect Op = "redirect"
)

// Request is one call of a Workflows method.
type Request struct {
	Op        Op             `json:"op"`
	StateFile string         `json:"state_file"`
	Kill      bool           `json:"kill,omitempty"`   // pause
	Reason    string         `json:"reason,omitempty"` // pause, resume, stop
	Change    *engine.Change `json:"change,omitempty"` // redirect
}

// Answer is how the call went.
type Answer struct {
	Code    Code   `json:"code"`
	Message string `json:"message,omitempty"` // the error's words, for any code but ok
	// Workflow is what the workflow answered (sync; with no_worker, what
	// Temporal knew; stop: the closed workflow).
	Workflow *Workflow `json:"workflow,omitempty"`
}

// Code says how a call went: one per error type a caller tells apart.
type Code string

const (
	CodeOK         Code = "ok"
	CodeNotice     Code = "notice"      // done, with something to say (a hand edit kept aside)
	CodeRefused    Code = "refused"     // *engine.RefusedError
	CodeNoEngine   Code = "no_engine"   // *engine.ErrNoEngine
	CodeNotPaused  Code = "not_paused"  // engine.ErrNotPaused
	CodeNoWorker   Code = "no_worker"   // *NoWorkerError
	CodeBadRequest Code = "bad_request" // the request could not be read
	CodeFailed     Code = "failed"      // anything else
)

// CodeOf is the code of err (nil: ok).
func CodeOf(err error) Code {
	var re *engine.RefusedError
	var ne *engine.ErrNoEngine
	var nw *NoWorkerError
	var n interface{ Notice() string }
	switch {
	case err == nil:
		return CodeOK
	case errors.As(err, &re):
		return CodeRefused
	case errors.As(err, &ne):
		return CodeNoEngine
	case errors.Is(err, engine.ErrNotPaused):
		return CodeNotPaused
	case errors.As(err, &nw):
		return CodeNoWorker
	case errors.As(err, &n):
		return CodeNotice
	}
	return CodeFailed
}

// Err is the answer's error, of the type its code names (nil for ok).
func (a Answer) Err(stateFile string) error {
	msg := errors.New(a.Message)
	switch a.Code {
	case CodeOK:
		return nil
	case CodeNotice:
		return &noticeError{msg: a.Message}
	case CodeRefused:
		return &engine.RefusedError{Err: msg}
	case CodeNoEngine:
		return &engine.ErrNoEngine{StateFile: stateFile}
	case CodeNotPaused:
		return engine.ErrNotPaused
	case CodeNoWorker:
		return &NoWorkerError{Err: msg}
	case CodeBadRequest, CodeFailed:
		return msg
	}
	return fmt.Errorf("an answer with the unknown code %q: %s", a.Code, a.Message)
}

// noticeError is a notice that crossed the hand-over.
type noticeError struct{ msg string }

func (e *noticeError) Error() string  { return e.msg }
func (e *noticeError) Notice() string { return e.msg }

// Serve reads one Request from in, calls t and writes the Answer to out.
// The error is the answer's, for the exit code; a request that cannot be
// read is answered bad_request.
func Serve(ctx context.Context, in io.Reader, out io.Writer, t Workflows) error {
	var q Request
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	a, err := Answer{}, dec.Decode(&q)
	switch {
	case err != nil:
		err = fmt.Errorf("the hand-over request: %w", err)
		a = Answer{Code: CodeBadRequest, Message: err.Error()}
	case q.StateFile == "":
		err = errors.New("the hand-over request: state_file: required")
		a = Answer{Code: CodeBadRequest, Message: err.Error()}
	default:
		a, err = call(ctx, t, q)
	}
	if werr := json.NewEncoder(out).Encode(a); werr != nil {
		return fmt.Errorf("the hand-over answer: %w", werr)
	}
	return err
}

// call runs q on t.
func call(ctx context.Context, t Workflows, q Request) (Answer, error) {
	var wf Workflow
	var err error
	switch q.Op {
	case OpSync:
		wf, err = t.Sync(ctx, q.StateFile)
	case OpPause:
		err = t.Pause(ctx, q.StateFile, q.Kill, q.Reason)
	case OpResume:
		err = t.Resume(ctx, q.StateFile, q.Reason)
	case OpStop:
		wf, err = t.Stop(ctx, q.StateFile, q.Reason)
	case OpRedirect:
		if q.Change == nil {
			err = errors.New("the hand-over request: change: required for redirect")
			return Answer{Code: CodeBadRequest, Message: err.Error()}, err
		}
		err = t.Redirect(ctx, q.StateFile, *q.Change)
	default:
		err = fmt.Errorf("the hand-over request: op %q: want sync, pause, resume, stop or redirect", q.Op)
		return Answer{Code: CodeBadRequest, Message: err.Error()}, err
	}
	a := Answer{Code: CodeOf(err)}
	if err != nil {
		a.Message = err.Error()
	}
	if wf.ID != "" {
		a.Workflow = &wf
	}
	return a, err
}

// Remote is Workflows through the hand-over: each call runs Run, which
// gives in to a process that serves it (aot-temporal) and copies that
// process's stdout to out. Run's error is the process's failure; an answer
// on out wins over it (the process exits non-zero for a failed call).
type Remote struct {
	Run func(ctx context.Context, in io.Reader, out io.Writer) error
}

// Call asks q and returns the answer's workflow and error.
func (r Remote) Call(ctx context.Context, q Request) (Workflow, error) {
	data, err := json.Marshal(q)
	if err != nil {
		return Workflow{}, err
	}
	var out bytes.Buffer
	runErr := r.Run(ctx, bytes.NewReader(data), &out)
	var a Answer
	if jerr := json.Unmarshal(out.Bytes(), &a); jerr != nil || a.Code == "" {
		if runErr != nil {
			return Workflow{}, runErr
		}
		return Workflow{}, fmt.Errorf("the hand-over answer to %s: %q is no answer", q.Op, bytes.TrimSpace(out.Bytes()))
	}
	var wf Workflow
	if a.Workflow != nil {
		wf = *a.Workflow
	}
	return wf, a.Err(q.StateFile)
}

func (r Remote) Sync(ctx context.Context, stateFile string) (Workflow, error) {
	return r.Call(ctx, Request{Op: OpSync, StateFile: stateFile})
}

func (r Remote) Pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	_, err := r.Call(ctx, Request{Op: OpPause, StateFile: stateFile, Kill: kill, Reason: reason})
	return err
}

func (r Remote) Resume(ctx context.Context, stateFile, reason string) error {
	_, err := r.Call(ctx, Request{Op: OpResume, StateFile: stateFile, Reason: reason})
	return err
}

func (r Remote) Stop(ctx context.Context, stateFile, reason string) (Workflow, error) {
	return r.Call(ctx, Request{Op: OpStop, StateFile: stateFile, Reason: reason})
}

func (r Remote) Redirect(ctx context.Context, stateFile string, c engine.Change) error {
	_, err := r.Call(ctx, Request{Op: OpRedirect, StateFile: stateFile, Change: &c})
	return err
}
