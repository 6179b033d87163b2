//go:build !temporal

package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
)

// The Temporal path lives in aot-temporal (this program built with the
// temporal tag): the Temporal SDK would add its start-up time to every
// aot command, and the state commands run on every hook and tool call.
// The controls reach it through the typed hand-over (serve_temporal_exec.go);
// the commands that are Temporal through and through (aot run --engine
// temporal, aot worker, aot codec-server) hand their whole command line
// over to it.

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

// handOver runs aot-temporal with the command line args (without the
// program's name) in this process's place (see become): its exit code is
// this command's.
func handOver(args []string, io *streams) error {
	bin, err := temporalBinary()
	if err != nil {
		return err
	}
	return become(bin, args, io)
}

// commandLine is cmd's command line as cobra handed it over: a command
// that does not parse its flags gets all of them, those given before its
// name too.
func commandLine(cmd *cobra.Command, args []string) []string {
	return append([]string{cmd.Name()}, args...)
}

func runTemporal(ctx context.Context, opts *runOptions) error { return handOver(opts.args, opts.IO) }

// newCmdWorker is aot worker, handed over to aot-temporal.
func newCmdWorker(d *deps, g *globalOptions, runF func(*workerOptions) error) *cobra.Command {
	return &cobra.Command{
		Use:                "worker [flags]",
		Short:              "Run Temporal activities: agent attempts, merges and checks for loops on --engine temporal (aot-temporal)",
		DisableFlagParsing: true,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return handOver(commandLine(cmd, args), d.io)
		}),
	}
}

type workerOptions struct{}
