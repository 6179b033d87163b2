//go:build !linux

package proc

import (
	"os"
	"os/exec"
)

// waiter waits for a started command. Without waitid(WNOWAIT) the shell is
// reaped as soon as it exits.
type waiter struct {
	cmd *exec.Cmd
	err error
}

func newWaiter(cmd *exec.Cmd) *waiter { return &waiter{cmd: cmd} }

// exited returns when the shell has exited.
func (w *waiter) exited() { w.err = w.cmd.Wait() }

// reap returns the shell's exit; call it after exited returned.
func (w *waiter) reap() (*os.ProcessState, error) { return w.cmd.ProcessState, w.err }
