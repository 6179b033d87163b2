package hooks

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/aot-loop/aot/internal/proc"
)

// GuardEnv, set on a copy of the hook's own executable, makes it the
// hook's guard (see Answer); its value is the token to sweep.
const GuardEnv = "AOT_HOOK_GUARD"

// guardDone is what a hook writes to its guard when its check ended by
// itself: nothing is left to kill.
const guardDone = "done\n"

// Answer is Decide as a hook process runs it, owning its children: SIGTERM,
// SIGINT and SIGHUP cancel the decision (a base-case check in progress is
// killed as a tree, and the hook gives no decision), and before a check
// starts a guard process is started that kills the check's processes if
// the hook dies without saying it is done, SIGKILL included (Claude Code
// kills a hook at its timeout). The check's processes are found by a token
// added to this process's environment, which every descendant inherits
// (proc.TokenEnv): the sweep is that of proc.KillTree, on Linux. argv is
// the hook's own command line (os.Args), to start the guard as the same
// command.
func Answer(ctx context.Context, opts Options, in Input, argv []string) (Decision, error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if opts.Guard == nil {
		opts.Guard = func() (func(), error) { return startGuard(argv) }
	}
	return Decide(ctx, opts, in)
}

// startGuard starts the guard: this executable again, as argv, in a
// session of its own, reading a pipe only this process writes. It marks
// this process's environment with the guard's token, so every check
// started afterwards carries it. done tells the guard the check ended.
func startGuard(argv []string) (done func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start the hook's guard: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the hook's guard: %w", err)
	}
	defer r.Close()
	token := proc.NewToken()
	cmd := exec.Command(exe)
	cmd.Args = argv
	cmd.Env = append(os.Environ(), GuardEnv+"="+token)
	cmd.Stdin = r // no stdout or stderr: the client waits for the hook's to close
	proc.Detach(cmd)
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the hook's guard: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	marked := token
	if inherited := os.Getenv(proc.TokenEnv); inherited != "" {
		marked = inherited + ":" + token
	}
	if err := os.Setenv(proc.TokenEnv, marked); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the hook's guard: %w", err)
	}
	return func() {
		_, _ = io.WriteString(w, guardDone)
		w.Close()
	}, nil
}

// RunGuard is the whole life of a hook's guard: it waits for its stdin to
// end, which happens when the hook exits however it exits, and unless the
// hook said its check was done, kills every process carrying token. It
// returns the exit code.
func RunGuard(stdin io.Reader, token string) int {
	data, _ := io.ReadAll(stdin)
	if bytes.Equal(data, []byte(guardDone)) {
		return 0
	}
	if err := proc.KillTree(proc.Tree{Token: token}); err != nil {
		return 1
	}
	return 0
}
