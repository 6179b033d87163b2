//go:build unix

package proc

import (
	"os/exec"
	"syscall"
)

// Detach makes cmd start in a session of its own, with no controlling
// terminal: it outlives the process that starts it, and a Ctrl-C or a kill
// of that process's group does not reach it.
func Detach(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
}
