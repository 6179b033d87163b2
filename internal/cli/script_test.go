package cli

import (
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/aot-loop/aot/internal/hooks"
)

// TestMain lets the test binary act as the aot command inside scripts.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"aot": func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		// cmd/aot-hook, for the hook scripts; not named aot-hook, which aot
		// plugin install would then find on PATH in every script.
		"aot-hook-bin": func() { os.Exit(hooks.Main(os.Args, os.Stdin, os.Stdout, os.Stderr, os.Getenv, os.Getwd)) },
	})
}

// TestScripts runs every testdata/script/*.txtar: each is a user session
// with the aot command, its outputs, exit codes and resulting files.
func TestScripts(t *testing.T) {
	cmds := map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"waitfor": cmdWaitFor,
		"pidgone": cmdPIDGone,
		"signal":  cmdSignal,
		"sparse":  cmdSparse,
	}
	maps.Copy(cmds, stateScriptCmds())
	testscript.Run(t, testscript.Params{
		Dir:       "testdata/script",
		Cmds:      cmds,
		Condition: scriptCondition,
		Setup: func(env *testscript.Env) error {
			env.Setenv("NO_COLOR", "1")
			env.Setenv(envStateFile, "")
			return nil
		},
	})
}

// waitfor FILE REGEXP waits (at most 20s) until FILE matches REGEXP: the
// way a script waits for a background engine to reach a point.
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfor FILE REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(ts.MkAbs(args[0])); err == nil && re.Match(data) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("%s did not match %q within 20s", args[0], args[1])
}

// pidgone FILE checks (within 5s) that the process whose pid FILE holds has
// ended: an agent that was killed, with its process group.
func cmdPIDGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: pidgone FILE")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	ts.Check(err)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("process %d is still running", pid)
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat))
	return len(fields) < 3 || fields[2] != "Z"
}

// signal NAME FILE sends the signal NAME (HUP, TERM, INT) to the process
// whose pid FILE holds: a terminal closing on a running aot, for example.
func cmdSignal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: signal NAME FILE")
	}
	sigs := map[string]syscall.Signal{"HUP": syscall.SIGHUP, "TERM": syscall.SIGTERM, "INT": syscall.SIGINT}
	sig, ok := sigs[args[0]]
	if !ok {
		ts.Fatalf("unknown signal %s", args[0])
	}
	data, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	ts.Check(err)
	ts.Check(syscall.Kill(pid, sig))
}

// sparse PATH MIB makes a file of MIB mebibytes that takes no disk space (a
// hole): a huge state file, cheaply.
func cmdSparse(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sparse PATH MIB")
	}
	mib, err := strconv.Atoi(args[1])
	ts.Check(err)
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	ts.Check(f.Truncate(int64(mib) << 20))
	ts.Check(f.Close())
}
