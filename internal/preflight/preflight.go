// Package preflight checks what a loop needs from the machine before it
// starts: each role's agent CLI on PATH and able to log in, git able to
// make the attempts' worktrees, a writable worktree folder, the kernel
// sandbox and the Temporal service. aot doctor prints every check; aot run
// and aot worker run the quick ones and refuse to start on an error, so a
// missing CLI costs one line instead of a loop of failed attempts.
//
// Nothing here sends a request to a model or changes the project: the
// worktree check makes a throwaway worktree and removes it.
package preflight

import (
	"os"
	"os/exec"
	"strings"
)

// Level is how bad a check's finding is.
type Level string

const (
	OK      Level = "ok"
	Warning Level = "warning" // works, perhaps not as intended
	Error   Level = "error"   // a run would fail on it
)

// Check is one finding, with the fix in words when it is not ok.
type Check struct {
	Name   string `json:"name"`
	Level  Level  `json:"level"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// String is the check as one sentence: the detail and its fix.
func (c Check) String() string {
	if c.Fix == "" {
		return c.Name + ": " + c.Detail
	}
	return c.Name + ": " + c.Detail + "; " + c.Fix
}

// Errors are the checks of level Error in list.
func Errors(list []Check) []Check {
	var out []Check
	for _, c := range list {
		if c.Level == Error {
			out = append(out, c)
		}
	}
	return out
}

// Env is the outside world the checks look at.
type Env struct {
	Getenv   func(string) string
	LookPath func(string) (string, error)
	Home     string // the user's home folder, where the CLIs keep their logins
}

// System is the Env of this process.
func System() Env {
	home, _ := os.UserHomeDir()
	return Env{Getenv: os.Getenv, LookPath: exec.LookPath, Home: home}
}

func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return strings.TrimSpace(e.Getenv(k))
}

func (e Env) lookPath(name string) (string, error) {
	if e.LookPath == nil {
		return exec.LookPath(name)
	}
	return e.LookPath(name)
}

func ok(name, detail string) Check { return Check{Name: name, Level: OK, Detail: detail} }

func warn(name, detail, fix string) Check {
	return Check{Name: name, Level: Warning, Detail: detail, Fix: fix}
}

func fail(name, detail, fix string) Check {
	return Check{Name: name, Level: Error, Detail: detail, Fix: fix}
}
