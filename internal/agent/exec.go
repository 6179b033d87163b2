package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/proc"
)

// Exec runs a command for every task: the task as JSON on stdin, the answer
// as one JSON document on stdout, stderr to the attempt's log.
type Exec struct {
	Command string
	Timeout time.Duration // per attempt; 0 = no limit beyond ctx
	// Log, when set, returns where an attempt's stderr goes.
	Log func(t Task) (io.WriteCloser, error)
}

// maxAnswer bounds what is read from an agent's stdout.
const maxAnswer = 16 << 20

// Run runs one attempt.
func (e *Exec) Run(ctx context.Context, t Task) (Result, error) {
	if strings.TrimSpace(e.Command) == "" {
		return Result{}, &AttemptError{Reason: "no agent command configured"}
	}
	if e.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.Timeout)
		defer cancel()
	}
	input, err := json.Marshal(t)
	if err != nil {
		return Result{}, fmt.Errorf("encode task: %w", err)
	}
	cmd := proc.Shell(ctx, e.Command)
	cmd.Dir = t.Workdir
	cmd.Env = append(os.Environ(),
		"AOT_ROLE="+string(t.Role),
		"AOT_ATOM_ID="+t.Atom.ID,
		"AOT_STATE_FILE="+t.StateFile,
		"AOT_ATTEMPT="+strconv.Itoa(t.Attempt),
	)
	cmd.Stdin = bytes.NewReader(input)
	var stdout limitedBuffer
	stdout.max = maxAnswer
	cmd.Stdout = &stdout
	if e.Log != nil {
		w, err := e.Log(t)
		if err == nil {
			defer w.Close()
			cmd.Stderr = w
		}
	}
	start := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{}, &AttemptError{Reason: fmt.Sprintf("timed out after %s; process group killed", time.Since(start).Round(time.Millisecond))}
		}
		return Result{}, &AttemptError{Reason: "cancelled; process group killed"}
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return Result{}, &AttemptError{Reason: fmt.Sprintf("agent exited with %s", ee.ProcessState)}
		}
		return Result{}, &AttemptError{Reason: fmt.Sprintf("agent did not run: %v", err)}
	}
	if stdout.over {
		return Result{}, &AttemptError{Reason: fmt.Sprintf("agent wrote more than %d bytes to stdout", maxAnswer)}
	}
	r, err := Decode(t.Role, bytes.TrimSpace(stdout.Bytes()))
	if err != nil {
		return Result{}, &AttemptError{Reason: "malformed answer: " + err.Error()}
	}
	return r, nil
}

type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		b.over = true
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
