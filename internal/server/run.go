package server

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
)

// startRequest is the body of start: aot run's flags.
type startRequest struct {
	Agent         string   `json:"agent,omitempty"`
	AgentCommand  string   `json:"agent_command,omitempty"`
	Model         string   `json:"model,omitempty"`
	Roles         []string `json:"roles,omitempty"`
	MaxParallel   int      `json:"max_parallel,omitempty"`
	MaxIterations int      `json:"max_iterations,omitempty"`
}

func (q *startRequest) args() ([]string, error) {
	var args []string
	add := func(flag, v string) {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	add("--agent", q.Agent)
	add("--agent-command", q.AgentCommand)
	add("--model", q.Model)
	for _, r := range q.Roles {
		if !strings.Contains(r, "=") {
			return nil, fmt.Errorf("roles: %q is not ROLE=AGENT[:MODEL]", r)
		}
		add("--role", r)
	}
	if q.MaxParallel < 0 || q.MaxIterations < 0 {
		return nil, fmt.Errorf("max_parallel and max_iterations must not be negative")
	}
	if q.MaxParallel > 0 {
		add("--max-parallel", strconv.Itoa(q.MaxParallel))
	}
	if q.MaxIterations > 0 {
		add("--max-iterations", strconv.Itoa(q.MaxIterations))
	}
	return args, nil
}

// child is an aot run this server started.
type child struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// runLog is where the output of an aot run started by the server goes.
func runLog(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "serve-run.log")
}

// startError is a start the loop refused: the gate, an agent missing.
type startError struct {
	code int
	msg  string
}

func (e *startError) Error() string { return e.msg }

// start runs aot run for the loop in a session of its own, so that it
// outlives the server, and waits until its engine holds the run lock or it
// ends (then its own words say why).
func (s *Server) start(l *loop, q startRequest) (int, error) {
	args, err := q.args()
	if err != nil {
		return 0, &startError{code: 400, msg: err.Error()}
	}
	l.startMu.Lock()
	defer l.startMu.Unlock()
	if _, err := l.read(); err != nil {
		return 0, err
	}
	if pid, held, _ := runlock.Holder(l.stateFile); held {
		return 0, &startError{code: 409, msg: fmt.Sprintf("the loop is already running (engine pid %d)", pid)}
	}
	if id, ok := l.workflowRunning(); ok {
		return 0, &startError{code: 409, msg: fmt.Sprintf("the loop is already running (Temporal workflow %s)", id)}
	}
	if err := os.MkdirAll(journal.DirFor(l.stateFile), journal.DirMode); err != nil {
		return 0, err
	}
	logPath := runLog(l.stateFile)
	if err := l.reg.within(logPath); err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, journal.FileMode)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fi, _ := logf.Stat()
	from := int64(0)
	if fi != nil {
		from = fi.Size()
	}
	fmt.Fprintf(logf, "--- %s aot run started by aot serve\n", time.Now().Format(time.RFC3339))
	cmd := exec.Command(s.opts.Exe, append([]string{"run", "--state-file", l.stateFile}, args...)...)
	cmd.Dir = state.ProjectRoot(l.stateFile)
	cmd.Stdout, cmd.Stderr = logf, logf
	proc.Detach(cmd)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start aot run: %w", err)
	}
	c := &child{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	l.mu.Lock()
	l.child = c
	l.mu.Unlock()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			// Exit 2 is a start refused for its request (an unknown agent,
			// a missing CLI): the client's to fix.
			code := http.StatusUnprocessableEntity
			if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 2 {
				code = http.StatusBadRequest
			}
			return 0, &startError{code: code, msg: "aot run ended at once: " + causeOf(logPath, from)}
		case <-deadline:
			return cmd.Process.Pid, nil
		case <-tick.C:
			if pid, held, _ := runlock.Holder(l.stateFile); held && pid == cmd.Process.Pid {
				return pid, nil
			}
		}
	}
}

// causeOf is why an aot run that ended at once did: its error lines (aot:
// ...) from what it wrote to path after offset, without the help a usage
// error prints below them; else the tail of that output.
func causeOf(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err == nil && int64(len(data)) >= offset {
		var lines []string
		for _, l := range strings.Split(string(data[offset:]), "\n") {
			if msg, ok := strings.CutPrefix(l, "aot: "); ok {
				lines = append(lines, strings.TrimSpace(msg))
			}
		}
		if len(lines) > 0 {
			return strings.Join(lines, "; ")
		}
	}
	return tailOf(path, offset)
}

// tailOf is what a file got after offset, shortened for an error message.
func tailOf(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < offset {
		return "(no output)"
	}
	data = bytes.TrimSpace(data[offset:])
	if i := bytes.IndexByte(data, '\n'); i >= 0 && bytes.HasPrefix(data, []byte("---")) {
		data = bytes.TrimSpace(data[i+1:])
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	if len(data) == 0 {
		return "(no output)"
	}
	return string(data)
}
