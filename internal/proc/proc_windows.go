//go:build windows

package proc

import (
	"os"
	"os/exec"
)

var shell = []string{"cmd", "/C"}

func setAttrs(cmd *exec.Cmd) {}

func becomeSubreaper() {}

// killTree kills the shell process only; without job objects its
// descendants may survive.
func killTree(t Tree, sh *os.Process) error {
	if sh != nil {
		// Our own child: its handle is safe even if the pid was reused.
		if err := sh.Kill(); err != nil && err != os.ErrProcessDone {
			return err
		}
		return nil
	}
	if t.PGID <= 0 {
		return nil
	}
	p, err := os.FindProcess(t.PGID)
	if err != nil {
		return nil // already gone
	}
	defer p.Release()
	if err := p.Kill(); err != nil && err != os.ErrProcessDone {
		return err
	}
	return nil
}

func alive(t Tree) bool {
	if t.PGID <= 0 {
		return false
	}
	p, err := os.FindProcess(t.PGID)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
