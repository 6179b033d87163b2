// Package proc runs child processes as a group that can be killed whole:
// a shell command that starts grandchildren must not leave any behind when
// its deadline passes or its caller cancels.
package proc

import (
	"context"
	"os/exec"
	"time"
)

// waitDelay bounds how long Wait waits for pipes that a killed group's
// descendants might still hold.
const waitDelay = 2 * time.Second

// Shell returns a command running script through the platform's shell, in its
// own process group, killed as a group when ctx is done.
func Shell(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, shell[0], append(shell[1:], script)...)
	Group(cmd)
	return cmd
}

// Group makes cmd start in its own process group and be killed as a group
// when its context is done.
func Group(cmd *exec.Cmd) {
	setGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = waitDelay
}

// Kill kills the process group of a started command.
func Kill(cmd *exec.Cmd) error { return killGroup(cmd) }
