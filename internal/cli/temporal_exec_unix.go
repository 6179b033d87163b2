//go:build !temporal && !windows

package cli

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// become replaces this process with aot-temporal running the command line
// args: the pid a supervisor, a shell or a terminal holds is then the
// process that works, so SIGINT, SIGTERM and SIGHUP reach it as they are
// sent, and its exit code is the one they see. It keeps this process's
// own stdin, stdout and stderr (io is for Windows' child). It returns
// only if the exec failed.
func become(bin string, args []string, io *streams) error {
	// Handlers do not survive an exec but ignored signals would: leave
	// these three as this process found them.
	signal.Reset(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	argv := append([]string{bin}, args...)
	err := syscall.Exec(bin, argv, os.Environ())
	return fmt.Errorf("run %s: %w", bin, err)
}
