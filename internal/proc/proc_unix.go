//go:build !windows

package proc

import (
	"os/exec"
	"syscall"
)

var shell = []string{"/bin/sh", "-c"}

// setGroup makes cmd lead its own process group.
func setGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// groupOK reports whether pgid may be signalled as a group: never all
// processes (-1), never our own group.
func groupOK(pgid int) bool {
	return pgid > 1 && pgid != syscall.Getpgrp()
}

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) error {
	if !groupOK(pgid) {
		return nil
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}
