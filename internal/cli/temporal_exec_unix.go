//go:build !temporal && !windows

package cli

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// become replaces this process with aot-temporal running the same command
// line: the pid a supervisor, a shell or a terminal holds is then the
// process that works, so SIGINT, SIGTERM and SIGHUP reach it as they are
// sent, and its exit code is the one they see. It returns only if the
// exec failed.
func become(bin string) error {
	// Handlers do not survive an exec but ignored signals would: leave
	// these three as this process found them.
	signal.Reset(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	argv := append([]string{bin}, os.Args[1:]...)
	err := syscall.Exec(bin, argv, os.Environ())
	return fmt.Errorf("run %s: %w", bin, err)
}
