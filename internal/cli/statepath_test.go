package cli

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/confine"
)

// stateCommands is every command that reads or writes the state file, with
// arguments that pass its usage checks: refusedbyall runs each of them on a
// path that must be refused. TestStateCommandsAreAllListed keeps the list
// complete.
var stateCommands = [][]string{
	{"state"},
	{"state", "--json"},
	{"validate"},
	{"gate"},
	{"init", "--goal", "g", "--background", "b", "--deliverables", "d", "--done", "c", "--check", "command:true", "--atom", "A1=x"},
	{"init", "--force", "--goal", "g", "--background", "b", "--deliverables", "d", "--done", "c", "--check", "command:true", "--atom", "A1=x"},
	{"atom", "set", "A1", "resolved"},
	{"atom", "add", "A9", "--description", "x"},
	{"atom", "decompose", "A1", "--child", "A1a=x", "--reason", "r"},
	{"bind", "A1", "--summary", "s"},
	{"or", "switch", "g", "B2", "--reason", "r"},
	{"or", "fail", "B1"},
	{"control", "status", "stopped"},
	{"verify"},
	{"run", "--agent-command", "true"},
	{"stop"},
	{"redirect", "--reason", "r", "--goal", "x"},
	{"status"},
	{"top"},
	{"pause"},
	{"resume"},
	{"graph"},
	{"doctor", "--agent-command", "true"},
}

// Commands that take --state-file (every command does) but never touch it.
var stateFree = []string{"aot serve", "aot worker", "aot codec-server", "aot workflow-call", "aot demo", "aot demo-agent", "aot agent-guard", "aot version", "aot verify command", "aot verify file"}

func TestStateCommandsAreAllListed(t *testing.T) {
	d := &deps{io: newStreams(nil, &bytes.Buffer{}, &bytes.Buffer{}, func(string) string { return "" }), getenv: func(string) string { return "" }, now: time.Now}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.HasSubCommands() || !c.Runnable() || c.Name() == "help" || c.Name() == "completion" || slices.Contains(stateFree, c.CommandPath()) {
			return
		}
		words := strings.Fields(c.CommandPath())[1:]
		for _, args := range stateCommands {
			if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
				return
			}
		}
		t.Errorf("%s is not in stateCommands (or stateFree): add it, with arguments", c.CommandPath())
	}
	walk(newCmdRoot(d))
}

// stateScriptCmds are the script commands for state paths that are not regular
// files: making them, looking at them, and running commands on them with a
// deadline.
func stateScriptCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"mkfifo":       cmdMkfifo,
		"mksock":       cmdMksock,
		"mknod":        cmdMknod,
		"kind":         cmdKind,
		"perm":         cmdPerm,
		"within":       cmdWithin,
		"refusedbyall": cmdRefusedByAll,
	}
}

// scriptCondition: [mknod] holds where a device node can be made.
func scriptCondition(cond string) (bool, error) {
	switch cond {
	case "mknod":
		return canMknod(), nil
	case "temporal":
		return temporalBuild, nil // aot-temporal's build, not aot's
	case "landlock":
		return confine.Probe().On, nil // the kernel can confine agents
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

// mkfifo PATH makes a named pipe.
func cmdMkfifo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mkfifo PATH")
	}
	ts.Check(mkfifo(ts.MkAbs(args[0])))
}

// mksock PATH makes a Unix socket file (nothing listens on it).
func cmdMksock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mksock PATH")
	}
	ts.Check(mksock(ts.MkAbs(args[0])))
}

// mknod PATH makes a character device with the numbers of /dev/null (so
// nothing is harmed should a bug write to it); guard it with [mknod].
func cmdMknod(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mknod PATH")
	}
	ts.Check(mknodNull(ts.MkAbs(args[0])))
}

// kind PATH KIND checks what PATH itself is (a symbolic link is not
// followed): file, dir, symlink, fifo, socket, chardev, blockdev or other.
func cmdKind(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: kind PATH KIND")
	}
	fi, err := os.Lstat(ts.MkAbs(args[0]))
	ts.Check(err)
	got := kindName(fi.Mode())
	if (got == args[1]) == neg {
		ts.Fatalf("%s is a %s (want %s%s)", args[0], got, map[bool]string{true: "not "}[neg], args[1])
	}
}

// perm PATH OCTAL checks the permission bits of PATH (not following a link).
func cmdPerm(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: perm PATH OCTAL")
	}
	want, err := strconv.ParseUint(args[1], 8, 32)
	ts.Check(err)
	fi, err := os.Lstat(ts.MkAbs(args[0]))
	ts.Check(err)
	if got := fi.Mode().Perm(); (got == fs.FileMode(want)) == neg {
		ts.Fatalf("%s has mode %#o (want %s%#o)", args[0], uint32(got), map[bool]string{true: "not "}[neg], want)
	}
}

func kindName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "chardev"
	case m&fs.ModeDevice != 0:
		return "blockdev"
	}
	return "other"
}

// within DURATION PROG [ARGS...] runs PROG (a program on the script's
// PATH, such as aot) like exec does, but fails the script, killing PROG, if
// it has not returned within DURATION: a command that hangs fails the test
// instead of hanging it. Its stdout and stderr are the script's.
func cmdWithin(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: within DURATION PROG [ARGS...]")
	}
	limit, err := time.ParseDuration(args[0])
	ts.Check(err)
	stdout, stderr, code, err := runWithin(ts, limit, args[1], args[2:])
	fmt.Fprint(ts.Stdout(), stdout)
	fmt.Fprint(ts.Stderr(), stderr)
	ts.Check(err)
	switch {
	case neg && code == 0:
		ts.Fatalf("%s succeeded unexpectedly", args[1])
	case !neg && code != 0:
		ts.Fatalf("%s failed: exit status %d", args[1], code)
	}
}

// refusedbyall PATH REGEXP runs every command that reads or writes the
// state file (stateCommands) with --state-file PATH, and checks that each
// returns within a second with exit status 1 and an error matching REGEXP
// (on stderr, or on stdout for the commands that report there).
func cmdRefusedByAll(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: refusedbyall PATH REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	var failures []string
	for _, c := range stateCommands {
		argv := append(slices.Clone(c), "--state-file", args[0])
		line := "aot " + strings.Join(argv, " ")
		start := time.Now()
		stdout, stderr, code, err := runWithin(ts, 3*time.Second, "aot", argv)
		ts.Logf("%s: exit %d in %s", line, code, time.Since(start).Round(time.Millisecond))
		switch {
		case err != nil:
			failures = append(failures, err.Error())
		case code != exitFail:
			failures = append(failures, fmt.Sprintf("%s: exit status %d, want %d\n%s%s", line, code, exitFail, stdout, stderr))
		case !re.MatchString(stdout + stderr):
			failures = append(failures, fmt.Sprintf("%s: output does not match %q:\n%s%s", line, args[1], stdout, stderr))
		}
	}
	if len(failures) > 0 {
		ts.Fatalf("%s", strings.Join(failures, "\n"))
	}
}

// runWithin runs prog from the script's PATH in the script's directory and
// environment, killing it after limit.
func runWithin(ts *testscript.TestScript, limit time.Duration, prog string, args []string) (stdout, stderr string, code int, err error) {
	path := prog
	if filepath.Base(prog) == prog {
		path = ""
		for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
			if fi, err := os.Stat(filepath.Join(dir, prog)); err == nil && fi.Mode().IsRegular() {
				path = filepath.Join(dir, prog)
				break
			}
		}
		if path == "" {
			return "", "", -1, fmt.Errorf("%s not found in the script's PATH", prog)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	cmd.WaitDelay = 100 * time.Millisecond
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		return o.String(), e.String(), -1, fmt.Errorf("%s %s did not return within %s (killed)", prog, strings.Join(args, " "), limit)
	}
	if cmd.ProcessState == nil {
		return o.String(), e.String(), -1, err
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode(), nil
}

// scriptEnv is the environment a script gives its commands, as far as aot
// cares: the process environment with the script's values of these keys.
func scriptEnv(ts *testscript.TestScript) []string {
	keys := []string{"PATH", "HOME", "TMPDIR", "WORK", "NO_COLOR", envStateFile, "AOT_AGENT_COMMAND"}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(keys, k)
	})
	for _, k := range keys {
		env = append(env, k+"="+ts.Getenv(k))
	}
	return append(env, "PWD="+ts.MkAbs("."))
}
