//go:build !temporal && windows

package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
)

// become runs aot-temporal with the command line args as a child on io,
// and ends with its exit code: Windows has no exec. Ctrl-C and Ctrl-Break reach
// every process of the console, the child included, so this one only
// holds on to them and waits for the child to act on them and exit.
func become(bin string, args []string, io *streams) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = io.In, io.Out, io.ErrOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return reported(ee.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", bin, err)
	}
	return nil
}
