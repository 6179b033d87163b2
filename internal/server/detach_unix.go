//go:build unix

package server

import (
	"os/exec"
	"syscall"
)

// detach puts the loop's aot run in a session of its own: it outlives the
// server and a Ctrl-C meant for the server.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
