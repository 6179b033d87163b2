// Package proc runs child processes as a tree that can be killed whole: a
// shell command that starts grandchildren must not leave any behind when it
// exits, when its deadline passes, when its caller cancels, or when the
// process that started it crashes.
//
// # How a tree is found
//
// Every command started by [Cmd.Run] gets:
//
//   - its own process group (its PGID is the shell's pid), and
//   - a random token in its environment, [TokenEnv]=<token>. Children
//     inherit the environment, so every descendant carries the token even if
//     it leaves the process group (setsid, a double fork, a daemon).
//
// [Tree] names the pair; it is JSON-serialisable so a caller can journal it
// and, after a crash, call [KillTree] from another process to kill the
// survivors.
//
// When a command ends, however it ends (its shell exits, the timeout passes,
// ctx is done, an output writer fails), the whole tree is killed with
// SIGKILL: the process group, and on Linux every process owned by our user
// whose /proc/PID/environ carries the token. The scan is repeated until no
// such process is left alive, so children forked during the kill are caught
// too. Only then is the remaining output drained (for a bounded time) and
// Run returns.
//
// A nested run (an aot started by an attempt of another aot) appends its own
// token to the inherited value (tokens are separated by ':'), so the outer
// run's token still reaches the inner run's descendants.
//
// # Linux extras
//
//   - The calling process becomes a child subreaper (PR_SET_CHILD_SUBREAPER)
//     the first time it runs a command: orphaned descendants are reparented
//     to it instead of to init, so the ones it kills can be reaped.
//   - Reaping: after a kill, a killed process that is now a zombie child of
//     ours is reaped with waitid(P_PID, pid, WEXITED|WNOHANG), but only when
//     its pid, start time and parent match what the scan saw and it is not
//     the shell (the shell is reaped by exec.Cmd's Wait, never by us). No
//     wait on -1 is ever issued, so no other exec.Cmd's Wait is stolen. An
//     orphan that escaped the kill and dies later stays a zombie until this
//     process exits.
//   - The shell gets Pdeathsig=SIGKILL: it dies with the process that started
//     it (Linux delivers this when the starting OS thread exits; the Go
//     runtime does not end idle threads, so in practice this is when the
//     process dies). Its descendants are not killed by that: a [Guard] (set
//     in [Cmd.Guard]) kills them all when the starting process dies, and
//     [KillTree] from a later process cleans up what a guard could not.
//
// # Limits
//
//   - Linux: a process that both clears its environment (env -i) and leaves
//     the process group (setsid) escapes. So does one that replaces the
//     token variable, or runs as another user.
//   - [KillTree] from another process kills the process group only when a
//     member of the group still carries the token, so a PGID reused by
//     unrelated processes is never signalled; a group member that cleared its
//     environment is then missed if no token carrier is left in the group.
//   - Between reading /proc and sending SIGKILL a pid could in theory be
//     reused; the window is microseconds and pids are allocated cyclically.
//   - macOS and other unix systems: there is no /proc to scan, so only the
//     process group is killed; setsid children and double forks that leave
//     the group survive, and [KillTree] from a later process cannot check
//     that the PGID still belongs to the tree.
//   - Windows: only the shell process is killed (no job objects).
package proc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// TokenEnv is the environment variable that carries a tree's token(s).
const TokenEnv = "AOT_PROC_TOKEN"

// waitDelay bounds how long Wait waits for pipes that a killed group's
// descendants might still hold (for commands made by Shell or Group).
const waitDelay = 2 * time.Second

// DefaultDrainDelay bounds how long Run keeps reading output after the tree
// was killed; only a process that escaped the kill can hold a pipe that long.
const DefaultDrainDelay = 2 * time.Second

// killBudget bounds how long a kill keeps scanning for survivors.
const killBudget = 5 * time.Second

// Tree identifies the processes of one run: the process group its shell
// leads and the token every descendant inherits in its environment.
type Tree struct {
	PGID  int    `json:"pgid"`
	Token string `json:"token"`
}

// IsZero reports whether t names nothing.
func (t Tree) IsZero() bool { return t.PGID == 0 && t.Token == "" }

// NewToken returns a fresh random token (32 hex digits).
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// KillTree kills, with SIGKILL, every live process of t: on Linux every
// process of ours carrying t.Token and the process group t.PGID provided a
// member of that group still carries the token; elsewhere the process group
// only (Windows: the process t.PGID). It may be called from any process, for
// instance one resuming after the crash of the process that started t. It
// returns once no carrier of the token is left alive, or with an error after
// a few seconds. A tree already gone is not an error.
func KillTree(t Tree) error { return killTree(t, nil) }

// Alive reports whether any process of t is still running (zombies count as
// dead): on Linux a carrier of the token or a member of the group; elsewhere
// a member of the group.
func Alive(t Tree) bool { return alive(t) }

// Shell returns a command running script through the platform's shell, in its
// own process group, killed as a group when ctx is done. If the command's Env
// carries a token (TokenEnv), the processes carrying it are killed too.
// Prefer [Cmd.Run], which also kills the tree when the shell exits and does
// not let a background child hold the output open.
func Shell(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, shell[0], append(shell[1:], script)...)
	Group(cmd)
	return cmd
}

// Group makes cmd start in its own process group and be killed as a group
// (plus the carriers of the token in cmd.Env, if any) when its context is
// done.
func Group(cmd *exec.Cmd) {
	setAttrs(cmd)
	cmd.Cancel = func() error { return Kill(cmd) }
	cmd.WaitDelay = waitDelay
}

// Kill kills the process group of a started command and, if cmd.Env carries
// a token, every process carrying it.
func Kill(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	t := Tree{PGID: cmd.Process.Pid, Token: tokenIn(cmd.Env)}
	if err := killTree(t, cmd.Process); err != nil {
		return cmd.Process.Kill()
	}
	return nil
}

// tokenIn returns the last token of the TokenEnv entry in env.
func tokenIn(env []string) string {
	v := ""
	for _, kv := range env {
		if s, ok := strings.CutPrefix(kv, TokenEnv+"="); ok {
			v = s
		}
	}
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		v = v[i+1:]
	}
	return v
}

// hasToken reports whether the value of a TokenEnv entry lists token.
func hasToken(value, token string) bool {
	if token == "" {
		return false
	}
	for value != "" {
		var t string
		t, value, _ = strings.Cut(value, ":")
		if t == token {
			return true
		}
	}
	return false
}

// withToken returns env (nil = this process's environment) without its
// TokenEnv entries, plus extra, plus one TokenEnv entry listing the
// inherited tokens and token.
func withToken(env, extra []string, token string) []string {
	if env == nil {
		env = os.Environ()
	}
	inherited := ""
	out := make([]string, 0, len(env)+len(extra)+1)
	for _, kv := range append(env[:len(env):len(env)], extra...) {
		if s, ok := strings.CutPrefix(kv, TokenEnv+"="); ok {
			inherited = s
			continue
		}
		out = append(out, kv)
	}
	if inherited != "" {
		token = inherited + ":" + token
	}
	return append(out, TokenEnv+"="+token)
}

// Cmd is a shell command to run as a tree with Run.
type Cmd struct {
	Script string   // run by /bin/sh -c (cmd /C on Windows)
	Dir    string   // working directory; "" = the caller's
	Env    []string // added to this process's environment
	Stdin  io.Reader

	// Stdout and Stderr receive the output, written from one goroutine per
	// distinct writer, in chunks of at most 32 KiB. When both are the same
	// writer, stdout and stderr share one pipe and keep their interleaving.
	// A nil writer discards. When a Write returns an error, the tree is
	// killed at once and that pipe is no longer read: a writer caps the
	// output by failing.
	Stdout io.Writer
	Stderr io.Writer

	// Timeout, when positive, ends the run after that long.
	Timeout time.Duration
	// DrainDelay bounds how long output is read after the tree was killed;
	// 0 = DefaultDrainDelay.
	DrainDelay time.Duration
	// OnStart, when set, is called with the tree right after the shell
	// started, before any output is read.
	OnStart func(Tree)
	// Guard, when set, starts the shell under a guard process that kills
	// the tree should this process die (see [Guard]). Ignored on Windows.
	Guard *Guard
}

// Result is how a run ended. The tree is dead when Run returns.
type Result struct {
	Tree Tree
	// State is the shell's exit; nil when it did not start.
	State *os.ProcessState
	// Err is why the shell did not start, or a failure to wait for it.
	Err error
	// WriteErr is the first error returned by Stdout or Stderr; the tree
	// was killed when it was returned.
	WriteErr error
	// TimedOut says the Timeout ended the run (and ctx was not done then).
	TimedOut bool
	// CtxErr is ctx.Err() if ctx was done when the run ended.
	CtxErr error
	// Undrained says a pipe was still open DrainDelay after the kill (a
	// process outside the tree held it): the output may be incomplete.
	Undrained bool
	// KillErr is a failure to kill the whole tree.
	KillErr error
}

// Run starts c in its own process group with a fresh token, feeds it Stdin,
// copies its output, and when its shell exits (or the timeout passes, ctx is
// done or a writer fails) kills its whole tree, reaps the shell and drains
// the output still buffered, waiting at most DrainDelay for it.
func (c *Cmd) Run(ctx context.Context) Result {
	var res Result
	if c.Timeout > 0 {
		runCtx, cancel := context.WithTimeout(ctx, c.Timeout)
		defer cancel()
		return c.run(ctx, runCtx, &res)
	}
	return c.run(ctx, ctx, &res)
}

func (c *Cmd) run(ctx, runCtx context.Context, res *Result) Result {
	prepare()
	token := NewToken()
	cmd := exec.Command(shell[0], append(shell[1:], c.Script)...)
	cmd.Dir = c.Dir
	cmd.Env = withToken(nil, c.Env, token)
	setAttrs(cmd)

	var closers []*os.File // parent ends, closed at the end
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	var childFiles []*os.File // child ends, closed after Start
	// inPipe makes a pipe the child reads and this process writes.
	inPipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			childFiles = append(childFiles, r)
			closers = append(closers, w)
		}
		return r, w, err
	}

	if c.Guard != nil && guarded {
		// The lifeline: the guard reads its end until this process, the
		// only holder of the other end, is gone.
		r, _, err := inPipe()
		if err != nil {
			res.Err = err
			return *res
		}
		c.Guard.wrap(cmd, r)
	}

	// Stdin.
	var stdinW *os.File
	switch in := c.Stdin.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			res.Err = err
			return *res
		}
		childFiles = append(childFiles, f)
		cmd.Stdin = f
	case *os.File:
		cmd.Stdin = in
	default:
		r, w, err := inPipe()
		if err != nil {
			res.Err = err
			return *res
		}
		cmd.Stdin, stdinW = r, w
	}

	// Output pipes: one per distinct writer.
	type reader struct {
		r *os.File
		w io.Writer
	}
	var readers []reader
	pipeFor := func(w io.Writer) (*os.File, error) {
		if w == nil {
			w = io.Discard
		}
		r, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		childFiles = append(childFiles, pw)
		closers = append(closers, r)
		readers = append(readers, reader{r, w})
		return pw, nil
	}
	closeChild := func() {
		for _, f := range childFiles {
			f.Close()
		}
	}
	out, err := pipeFor(c.Stdout)
	if err != nil {
		closeChild()
		res.Err = err
		return *res
	}
	cmd.Stdout = out
	if c.Stderr != nil && sameWriter(c.Stderr, c.Stdout) {
		cmd.Stderr = out
	} else {
		errW, err := pipeFor(c.Stderr)
		if err != nil {
			closeChild()
			res.Err = err
			return *res
		}
		cmd.Stderr = errW
	}

	err = cmd.Start()
	closeChild()
	if err != nil {
		res.Err = err
		return *res
	}
	res.Tree = Tree{PGID: cmd.Process.Pid, Token: token}
	if c.OnStart != nil {
		c.OnStart(res.Tree)
	}

	var ioWG sync.WaitGroup
	if stdinW != nil {
		ioWG.Add(1)
		go func() {
			defer ioWG.Done()
			_, _ = io.Copy(stdinW, c.Stdin)
			stdinW.Close()
		}()
	}
	writeFailed := make(chan struct{})
	var failOnce sync.Once
	var readWG sync.WaitGroup
	for _, rd := range readers {
		readWG.Add(1)
		go func() {
			defer readWG.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := rd.r.Read(buf)
				if n > 0 {
					if _, werr := rd.w.Write(buf[:n]); werr != nil {
						failOnce.Do(func() {
							res.WriteErr = werr
							close(writeFailed)
						})
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}

	w := newWaiter(cmd)
	exited := make(chan struct{})
	go func() {
		w.exited()
		close(exited)
	}()

	stopped := false
	select {
	case <-exited:
	case <-runCtx.Done():
		stopped = true
	case <-writeFailed:
		stopped = true
	}
	// Whichever way it ends, the run's outcome is fixed now.
	if ctx.Err() != nil {
		res.CtxErr = ctx.Err()
	} else if runCtx.Err() != nil {
		res.TimedOut = true
	}
	if stopped {
		res.KillErr = killTree(res.Tree, cmd.Process)
		<-exited
	}
	// The shell is dead but not reaped yet (on Linux), so its pid still
	// names our group: kill what is left of the tree.
	if err := killTree(res.Tree, cmd.Process); err != nil && res.KillErr == nil {
		res.KillErr = err
	}
	res.State, res.Err = w.reap()
	var ee *exec.ExitError
	if errors.As(res.Err, &ee) {
		res.Err = nil
	}

	// Drain what is buffered; every writer of the pipes should be dead.
	drained := make(chan struct{})
	go func() {
		readWG.Wait()
		close(drained)
	}()
	delay := c.DrainDelay
	if delay <= 0 {
		delay = DefaultDrainDelay
	}
	timer := time.NewTimer(delay)
	select {
	case <-drained:
		timer.Stop()
	case <-timer.C:
		res.Undrained = true
	}
	for _, rd := range readers {
		rd.r.Close()
	}
	if stdinW != nil {
		stdinW.Close()
	}
	<-drained
	ioWG.Wait()
	return *res
}

// sameWriter reports whether a and b are the same writer, without panicking
// on incomparable dynamic types.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

var prepareOnce sync.Once

// prepare sets up this process once before its first run (Linux: become a
// child subreaper).
func prepare() { prepareOnce.Do(becomeSubreaper) }
