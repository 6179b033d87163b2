package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/runlock"
)

// detachWait bounds how long aot run --detach waits for its engine to hold
// the run lock.
const detachWait = 30 * time.Second

// detachLog is the file, in the loop's own folder, that a detached engine's
// output goes to.
const detachLog = "run.out"

type detachDoc struct {
	Success bool   `json:"success"`
	PID     int    `json:"pid"`
	Log     string `json:"log"`
}

// runDetach is aot run --detach: the same command without --detach, started
// in a session and process group of its own with its output appended to
// the loop's run.out, so that it outlives this process, its terminal and
// the session (a Claude Code Bash call) that started it. It returns once
// the engine holds the run lock; an engine that ends first is reported
// with the end of its output and its exit code.
func runDetach(opts *runOptions) error {
	stateFile := opts.Global.StateFile
	pid, held, err := runlock.Holder(stateFile)
	if err != nil {
		return err
	}
	if held {
		return fmt.Errorf("the loop is already running (engine pid %d): aot status shows it, aot stop stops it", pid)
	}
	dir := journal.DirFor(stateFile)
	if err := os.MkdirAll(dir, journal.DirMode); err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	logPath, err := filepath.Abs(filepath.Join(dir, detachLog))
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, journal.FileMode)
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- %s aot run --detach\n", time.Now().Format(time.RFC3339))
	start := int64(0)
	if fi, err := logf.Stat(); err == nil {
		start = fi.Size()
	}
	cmd := exec.Command(opts.self, withoutDetach(opts.args)...)
	cmd.Stdout, cmd.Stderr = logf, logf // stdin: /dev/null, so no prompt waits for a terminal
	proc.Detach(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start aot run: %w", err)
	}
	ended := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(ended)
	}()
	deadline := time.After(detachWait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ended:
			code := cmd.ProcessState.ExitCode()
			fmt.Fprintf(opts.IO.ErrOut, "aot run ended at once (exit %d); the end of %s:\n%s\n", code, logPath, lastLines(logPath, start, 20))
			if code <= 0 {
				code = 1
			}
			return reported(code)
		case <-deadline:
			fmt.Fprintf(opts.IO.ErrOut, "aot: warning: the engine (pid %d) does not hold the run lock after %s; see %s\n", cmd.Process.Pid, detachWait, logPath)
			return reportDetached(opts, cmd.Process.Pid, logPath)
		case <-tick.C:
			if pid, held, _ := runlock.Holder(stateFile); held && pid == cmd.Process.Pid {
				return reportDetached(opts, pid, logPath)
			}
		}
	}
}

func reportDetached(opts *runOptions, pid int, logPath string) error {
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, detachDoc{Success: true, PID: pid, Log: logPath})
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "engine running in the background (pid %d); its output goes to %s\n", pid, logPath)
	fmt.Fprintln(opts.IO.Out, "aot status shows the progress, aot stop stops it")
	return nil
}

// withoutDetach drops the --detach flag from a command line.
func withoutDetach(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if a == "--detach" || strings.HasPrefix(a, "--detach=") {
			continue
		}
		out = append(out, a)
	}
	return out
}

// lastLines is at most n of the last lines a file got after offset.
func lastLines(path string, offset int64, n int) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) <= offset {
		return "(no output)"
	}
	lines := bytes.Split(bytes.TrimSpace(data[offset:]), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
