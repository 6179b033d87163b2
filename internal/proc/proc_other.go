//go:build !linux && !windows

package proc

import (
	"os"
	"os/exec"
	"syscall"
)

func setAttrs(cmd *exec.Cmd) { setGroup(cmd) }

func becomeSubreaper() {}

func guardAttrs(cmd *exec.Cmd) { setGroup(cmd) }

func childAttrs(cmd *exec.Cmd) {}

// killTree kills the process group only: without /proc there is no portable
// way to find the processes carrying the token.
func killTree(t Tree, sh *os.Process) error { return killGroup(t.PGID) }

func alive(t Tree) bool {
	return groupOK(t.PGID) && syscall.Kill(-t.PGID, 0) == nil
}
