//go:build windows

package proc

import "os/exec"

var shell = []string{"cmd", "/C"}

func setGroup(cmd *exec.Cmd) {}

// killGroup kills the child; without job objects its descendants may survive.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}
