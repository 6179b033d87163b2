//go:build unix

package simagent

import (
	"os"
	"syscall"
)

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
