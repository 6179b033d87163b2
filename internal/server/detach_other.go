//go:build !unix

package server

import "os/exec"

// detach: on other systems the loop's aot run is a plain child process.
func detach(cmd *exec.Cmd) {}
