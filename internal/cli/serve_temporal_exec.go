//go:build !temporal

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/server"
)

// aot serve's way to the workflows of loops on Temporal, in aot (which has
// no Temporal SDK): aot-temporal's own commands with --json, one process
// per question; their failure documents' codes carry the failures the API
// tells apart.

type serveWorkflows struct {
	bin func() (string, error) // aot-temporal
}

func newServeWorkflows() *serveWorkflows { return &serveWorkflows{bin: temporalBinary} }

func (s *serveWorkflows) Close() error { return nil }

// Sync runs aot-temporal status, which asks the workflow, projects it into
// the state file and says what it answered.
func (s *serveWorkflows) Sync(ctx context.Context, stateFile string) (server.Workflow, error) {
	out, stderr, err := s.run(ctx, stateFile, "status", "--events", "0")
	if err != nil {
		return server.Workflow{}, err
	}
	var doc struct {
		Workflow *workflowDoc `json:"workflow"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return server.Workflow{}, fmt.Errorf("aot-temporal status: %w", err)
	}
	if doc.Workflow == nil {
		// It showed the status from the file: its warning says why.
		msg := "aot-temporal status did not reach the workflow"
		for _, line := range strings.Split(string(stderr), "\n") {
			if strings.Contains(line, "behind its Temporal workflow") {
				msg = strings.TrimPrefix(strings.TrimSpace(line), "aot: ")
			}
		}
		return server.Workflow{}, errors.New(msg)
	}
	return doc.Workflow.forServer(), nil
}

func (s *serveWorkflows) Pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	args := []string{"pause", "--reason=" + reason}
	if kill {
		args = append(args, "--kill")
	}
	_, _, err := s.run(ctx, stateFile, args...)
	return err
}

func (s *serveWorkflows) Resume(ctx context.Context, stateFile, reason string) error {
	_, _, err := s.run(ctx, stateFile, "resume", "--reason="+reason)
	return err
}

func (s *serveWorkflows) Stop(ctx context.Context, stateFile, reason string) error {
	_, _, err := s.run(ctx, stateFile, "stop", "--reason="+reason)
	return err
}

// Redirect: a change aot redirect's flags cannot carry (a usage error) is
// refused as the engine refuses a bad change.
func (s *serveWorkflows) Redirect(ctx context.Context, stateFile string, c engine.Change) error {
	_, _, err := s.run(ctx, stateFile, redirectArgs(c)...)
	var ef *execFailure
	if errors.As(err, &ef) && ef.exit == exitUsage {
		return &engine.RefusedError{Err: err}
	}
	return err
}

// execFailure is an aot-temporal command that failed: its exit code and
// the words of its failure document (else of its stderr).
type execFailure struct {
	exit int
	msg  string
}

func (e *execFailure) Error() string { return e.msg }

// run runs aot-temporal ARGS --state-file F --json, killed with its process
// group when ctx ends. A failure whose document has a code is the typed
// error the code names.
func (s *serveWorkflows) run(ctx context.Context, stateFile string, args ...string) (stdout, stderr []byte, err error) {
	bin, err := s.bin()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, bin, append(args, "--state-file="+stateFile, "--json")...)
	proc.Group(cmd)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err == nil {
		return out.Bytes(), errb.Bytes(), nil
	}
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("aot-temporal %s: %w", args[0], ctx.Err())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return nil, nil, fmt.Errorf("run %s: %w", bin, err)
	}
	var f failure
	if json.Unmarshal(out.Bytes(), &f) != nil || f.Error == "" {
		f.Error = stderrLine(errb.Bytes(), fmt.Sprintf("aot-temporal %s: exit status %d", args[0], ee.ExitCode()))
	}
	ef := &execFailure{exit: ee.ExitCode(), msg: f.Error}
	switch f.Code {
	case codeRefused:
		return nil, nil, &engine.RefusedError{Err: ef}
	case codeNoEngine:
		return nil, nil, &engine.ErrNoEngine{StateFile: stateFile}
	case codeNotPaused:
		return nil, nil, engine.ErrNotPaused
	}
	return nil, nil, ef
}

// stderrLine is the last line of a command's stderr without aot's prefix, or
// def when there is none.
func stderrLine(stderr []byte, def string) string {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	last := strings.TrimPrefix(strings.TrimSpace(lines[len(lines)-1]), "aot: ")
	if last == "" {
		return def
	}
	return last
}

// redirectArgs is aot redirect's command line for c (flag=value, so that a
// value starting with a dash stays a value).
func redirectArgs(c engine.Change) []string {
	args := []string{"redirect", "--reason=" + c.Reason}
	str := func(flag, v string) {
		if v != "" {
			args = append(args, "--"+flag+"="+v)
		}
	}
	str("goal", c.Goal)
	str("background", c.BackgroundIntent)
	str("deliverables", c.Deliverables)
	str("done", c.DefinitionOfDone)
	for _, a := range c.AddAtoms {
		str("add-atom", a.ID+"="+a.Description)
		if len(a.DependsOn) > 0 {
			str("depends-on", a.ID+"="+strings.Join(a.DependsOn, ","))
		}
	}
	for _, id := range c.RemoveAtoms {
		str("remove-atom", id)
	}
	for _, sel := range c.Select {
		str("select", sel.Group+"="+sel.Choice)
	}
	num := func(flag string, n *int) {
		if n != nil {
			str(flag, strconv.Itoa(*n))
		}
	}
	num("max-iterations", c.MaxIterations)
	num("max-parallel", c.MaxParallelAgents)
	num("max-stall", c.MaxStallCount)
	num("max-attempts", c.MaxAttemptsPerAtom)
	if c.MaxWallTime != nil {
		args = append(args, "--max-wall-time="+*c.MaxWallTime)
	}
	if c.MaxCostUSD != nil {
		str("max-cost", strconv.FormatFloat(*c.MaxCostUSD, 'g', -1, 64))
	}
	if c.MaxTokens != nil {
		str("max-tokens", strconv.FormatInt(*c.MaxTokens, 10))
	}
	for _, id := range c.ClearBindings {
		str("clear-binding", id)
	}
	return args
}
