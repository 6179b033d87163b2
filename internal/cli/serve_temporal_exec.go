//go:build !temporal

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/aot-loop/aot/internal/control"
	"github.com/aot-loop/aot/internal/proc"
)

// The Temporal side of the controls (control.Workflows), in aot, which has
// no Temporal SDK: each call is handed over to aot-temporal workflow-call,
// one process per call, a JSON request on its stdin and a JSON answer with
// a code on its stdout (control.Remote).

type loopWorkflows struct{ control.Remote }

func openWorkflows() *loopWorkflows {
	return &loopWorkflows{Remote: control.Remote{Run: workflowCall(temporalBinary)}}
}

func (s *loopWorkflows) Close() error { return nil }

// workflowCall runs bin workflow-call with in and out as its stdin and
// stdout, killed with its process group when ctx ends. A failure without
// an answer is said with the last line of its stderr.
func workflowCall(bin func() (string, error)) func(ctx context.Context, in io.Reader, out io.Writer) error {
	return func(ctx context.Context, in io.Reader, out io.Writer) error {
		b, err := bin()
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, b, "workflow-call")
		proc.Group(cmd)
		var errb bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, &errb
		err = cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("aot-temporal workflow-call: %w", ctx.Err())
		case errors.As(err, &ee):
			return errors.New(stderrLine(errb.Bytes(), fmt.Sprintf("aot-temporal workflow-call: exit status %d", ee.ExitCode())))
		}
		return fmt.Errorf("run %s: %w", b, err)
	}
}

// stderrLine is the last line of a command's stderr without aot's prefix, or
// def when there is none.
func stderrLine(stderr []byte, def string) string {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	last := strings.TrimPrefix(strings.TrimSpace(lines[len(lines)-1]), "aot: ")
	if last == "" {
		return def
	}
	return last
}

// workflowCallRun: aot workflow-call is aot-temporal's.
func workflowCallRun(ctx context.Context, d *deps) error {
	return handOver([]string{"workflow-call"}, d.io)
}
