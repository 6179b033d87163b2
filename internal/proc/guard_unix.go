//go:build !windows

package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// guarded says a Guard can run on this platform.
const guarded = true

// Supervise is the body of a guard (see [Guard]): it runs argv as its child
// in its own process group, with its environment and standard files, and
// returns the exit code to leave with once the child exits. A child killed
// by SIGKILL, SIGTERM, SIGINT or SIGHUP makes the guard end by the same
// signal, so that the starting process sees the same end; other signals
// become the exit code 128+signal.
//
// When lifeline reads end of file first (the starting process died), the
// tree is killed: every process carrying the tree's token (the last one in
// this process's TokenEnv), then the process group, the guard included.
// Supervise does not return then.
func Supervise(lifeline *os.File, argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "guard: no command to run")
		return 2
	}
	syscall.CloseOnExec(int(lifeline.Fd()))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	childAttrs(cmd)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "guard: %v\n", err)
		return 127
	}
	// Once the sweep has begun, the guard must not end before the sweep
	// does, however its child ends.
	var sweeping sync.Mutex
	go func() {
		_, _ = io.Copy(io.Discard, lifeline)
		sweeping.Lock()
		killOwnTree()
	}()
	err := cmd.Wait()
	sweeping.Lock()
	var ws syscall.WaitStatus
	ok := cmd.ProcessState != nil
	if ok {
		ws, ok = cmd.ProcessState.Sys().(syscall.WaitStatus)
	}
	switch {
	case !ok:
		fmt.Fprintf(os.Stderr, "guard: %v\n", err)
		return 127
	case ws.Signaled():
		sig := ws.Signal()
		switch sig {
		case syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig)
			time.Sleep(time.Second) // the signal ends us meanwhile
		}
		return 128 + int(sig)
	}
	return ws.ExitStatus()
}

// killOwnTree kills the tree this guard leads: the carriers of its token,
// then its process group, which ends the guard too. It never returns.
func killOwnTree() {
	_ = killTree(Tree{Token: tokenIn(os.Environ())}, nil)
	if pgid := syscall.Getpgrp(); pgid == os.Getpid() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	os.Exit(137)
}
