//go:build !temporal

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
)

// The Temporal path lives in aot-temporal (this program built with the
// temporal tag): the Temporal SDK would add its start-up time to every
// aot command, and the state commands run on every hook and tool call.
// Here, whatever needs Temporal hands the whole command line over to it.

// temporalBinary is aot-temporal beside this aot, else on PATH.
func temporalBinary() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "aot-temporal")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("aot-temporal"); err == nil {
		return p, nil
	}
	return "", errors.New("this needs aot-temporal (aot with the Temporal engine), beside aot or on PATH: make build builds it (go build -tags temporal -o bin/aot-temporal ./cmd/aot)")
}

// handOver runs aot-temporal with this command line in this process's
// place (see become) and ends with its exit code.
func handOver() error {
	bin, err := temporalBinary()
	if err != nil {
		return err
	}
	return become(bin)
}

func runTemporal(ctx context.Context, opts *runOptions) error { return handOver() }

func temporalStop(opts *stopOptions) error                  { return handOver() }
func temporalPause(opts *pauseOptions, reason string) error { return handOver() }
func temporalRedirect(opts *redirectOptions) error          { return handOver() }

// temporalSync: aot status brings the state file in step through
// aot-temporal's, which then shows the status itself (so nothing is
// returned here: without aot-temporal the status is shown from the file).
func temporalSync(opts *statusOptions) *workflowDoc {
	bin, err := temporalBinary()
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "aot: the state file may be behind its Temporal workflow: %v\n", err)
		return nil
	}
	err = become(bin)
	var ce *cmdError
	if errors.As(err, &ce) {
		os.Exit(ce.code)
	}
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "aot: the state file may be behind its Temporal workflow: %v\n", err)
		return nil
	}
	os.Exit(0)
	return nil
}

// newCmdWorker is aot worker, handed over to aot-temporal.
func newCmdWorker(d *deps, g *globalOptions, runF func(*workerOptions) error) *cobra.Command {
	return &cobra.Command{
		Use:                "worker [flags]",
		Short:              "Run Temporal activities: agent attempts, merges and checks for loops on --engine temporal (aot-temporal)",
		DisableFlagParsing: true,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return handOver()
		}),
	}
}

type workerOptions struct{}
