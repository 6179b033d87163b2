// Command simagent is the simulated coding agent of the outcome benchmark: it
// answers one aot exec-protocol task (JSON on stdin, JSON on stdout) and does
// real file work in the task's workdir. Every knob is a flag; see
// internal/simagent and `simagent -h`.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/aot-loop/aot/internal/simagent"
)

func main() {
	cfg, err := simagent.ParseFlags(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := simagent.Run(cfg, simagent.ProcessEnv()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
