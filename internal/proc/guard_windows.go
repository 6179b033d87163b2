//go:build windows

package proc

import (
	"fmt"
	"os"
	"os/exec"
)

// guarded says a Guard can run on this platform: not on Windows, where
// Cmd.Run starts the shell itself.
const guarded = false

func guardAttrs(cmd *exec.Cmd) {}

// Supervise is not available on Windows.
func Supervise(lifeline *os.File, argv []string) int {
	fmt.Fprintln(os.Stderr, "guard: not available on Windows")
	return 2
}
