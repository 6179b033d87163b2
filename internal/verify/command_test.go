//go:build !windows

package verify

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCommandExit(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "noexec.sh"), []byte("#!/bin/sh\nexit 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := func(n int) *int { return &n }
	tests := []struct {
		name       string
		command    string
		expectFail bool
		passed     bool
		exit       *int // nil: killed or never started
		evidence   string
	}{
		{"success", "true", false, true, code(0), "Command exited with code 0 (success)"},
		{"failure", "exit 3", false, false, code(3), "Command exited with code 3 (failure)"},
		{"expected failure", "exit 1", true, true, code(1), "Command exited with code 1 (expected non-zero)"},
		{"unexpected success", "true", true, false, code(0), "Command exited with code 0 (expected failure)"},
		{"not found", "aot_no_such_command_xyz", true, false, code(127), "command not found"},
		{"not found, positive", "aot_no_such_command_xyz", false, false, code(127), "(failure)"},
		{"not executable", "./noexec.sh", true, false, code(126), "not executable"},
		{"shell killed", "kill -9 $$", true, false, nil, "killed"},
		{"child killed", "sh -c 'kill -9 $$'; exit $?", true, false, code(137), "signal 9"},
		{"stdin is empty", "cat", false, true, code(0), "(success)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Command(context.Background(), dir, tt.command, tt.expectFail, 5*time.Second)
			if got.Passed != tt.passed || !strings.Contains(got.Evidence, tt.evidence) {
				t.Errorf("passed %v, evidence %q; want %v and %q", got.Passed, got.Evidence, tt.passed, tt.evidence)
			}
			if (got.ExitCode == nil) != (tt.exit == nil) || (got.ExitCode != nil && *got.ExitCode != *tt.exit) {
				t.Errorf("exit code %v, want %v", deref(got.ExitCode), deref(tt.exit))
			}
			wantType := "command"
			if tt.expectFail {
				wantType = "not_command"
			}
			if got.Type != wantType || got.Command != tt.command || got.TimedOut {
				t.Errorf("type %q command %q timed out %v", got.Type, got.Command, got.TimedOut)
			}
		})
	}
}

func deref(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

func TestCommandRunsInDirAndKeepsOutput(t *testing.T) {
	dir := t.TempDir()
	got := Command(context.Background(), dir, "pwd; echo err >&2; exit 2", false, 5*time.Second)
	real, _ := filepath.EvalSymlinks(dir)
	if want := real + "\nerr\n"; got.OutputSummary != want {
		t.Fatalf("output %q, want %q", got.OutputSummary, want)
	}
}

func TestCommandEmpty(t *testing.T) {
	for _, c := range []string{"", "  \t"} {
		got := Command(context.Background(), t.TempDir(), c, true, time.Second)
		if got.Passed || got.ExitCode != nil || !strings.Contains(got.Evidence, "empty command") {
			t.Fatalf("%q: %+v", c, got)
		}
	}
}

func TestCommandOutputTail(t *testing.T) {
	dir := t.TempDir()
	big := "x" + strings.Repeat("é", 5000) + "\xff\nEND\n"
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	got := Command(context.Background(), dir, "cat big.txt", false, 5*time.Second)
	if !got.Passed {
		t.Fatalf("invalid UTF-8 output must not fail a successful command: %+v", got)
	}
	s := got.OutputSummary
	if !utf8.ValidString(s) || !strings.HasSuffix(s, "\uFFFD\nEND\n") || len(s) > outputTail+3 || len(s) < outputTail-10 {
		t.Fatalf("tail of %d bytes, valid %v, ends %q", len(s), utf8.ValidString(s), s[max(0, len(s)-10):])
	}
}

func TestCommandTimeoutKillsTheGroup(t *testing.T) {
	for _, expectFail := range []bool{false, true} {
		dir := t.TempDir()
		start := time.Now()
		got := Command(context.Background(), dir, "echo started; sleep 30 & echo $! > pid; wait", expectFail, 300*time.Millisecond)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("timeout took %v", d)
		}
		if got.Passed || !got.TimedOut || got.ExitCode != nil || !strings.Contains(got.Evidence, "timed out after 300ms") {
			t.Fatalf("%+v", got)
		}
		if got.OutputSummary != "started\n" {
			t.Errorf("output before the timeout was lost: %q", got.OutputSummary)
		}
		waitGone(t, readPid(t, filepath.Join(dir, "pid")))
	}
}

func TestCommandLeftoversAreKilled(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	got := Command(context.Background(), dir, "sleep 30 & echo $! > pid", false, 10*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a background child held the check for %v", d)
	}
	if !got.Passed {
		t.Fatalf("%+v", got)
	}
	waitGone(t, readPid(t, filepath.Join(dir, "pid")))
}

func TestCommandCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	got := Command(ctx, t.TempDir(), "sleep 30", true, time.Minute)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	if got.Passed || got.TimedOut || got.ExitCode != nil || !strings.Contains(got.Evidence, "stopped before it finished") {
		t.Fatalf("%+v", got)
	}
}

func TestCommandMissingDir(t *testing.T) {
	got := Command(context.Background(), filepath.Join(t.TempDir(), "nope"), "true", false, time.Second)
	if got.Passed || got.ExitCode != nil || !strings.Contains(got.Evidence, "could not start") {
		t.Fatalf("%+v", got)
	}
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitGone fails unless pid ends within a few seconds. A zombie counts as
// gone: it is dead, only not yet reaped by whoever adopted it.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		if syscall.Kill(pid, 0) != nil || isZombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d outlived the check", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
