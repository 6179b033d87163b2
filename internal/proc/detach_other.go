//go:build !unix

package proc

import "os/exec"

// Detach does nothing on systems without sessions: the command is a plain
// child process.
func Detach(cmd *exec.Cmd) {}
