//go:build unix

package fakellm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run the real agent CLIs (installed by `make agent-clis`)
// against the server: one scripted shell tool call that writes a file, then
// a final text. A missing CLI fails the test rather than skipping it.

// shellScript scripts tool (with input) on the first turn and a final text.
func shellScript(t *testing.T, tool, input string) Script {
	t.Helper()
	s, err := ParseScript([]byte(`{"conversations": [{"match": "write the marker", "require_tools": true, "turns": [
	  [{"type": "tool_use", "name": "` + tool + `", "input": ` + input + `}],
	  [{"type": "text", "text": "FAKELLM-DONE"}]
	]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type cliRun struct {
	stdout, stderr string
	err            error
}

// runCLI runs bin in dir with env added to a bare PATH, killing its whole
// process group when the deadline passes.
func runCLI(t *testing.T, dir string, env []string, bin string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return cliRun{stdout.String(), stderr.String(), err}
}

func cliBin(t *testing.T, name string) string {
	t.Helper()
	bin, err := CLIPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// checkRun asserts the CLI succeeded, the tool wrote the marker, the final
// text reached stdout, and every model request went to wantPath.
func checkRun(t *testing.T, srv *Server, proj string, run cliRun, wantPath string) {
	t.Helper()
	if run.err != nil {
		t.Errorf("CLI: %v\nstdout:\n%s\nstderr:\n%s", run.err, run.stdout, run.stderr)
	}
	if data, err := os.ReadFile(filepath.Join(proj, "marker.txt")); err != nil || strings.TrimSpace(string(data)) != "hi" {
		t.Errorf("marker.txt: %q, %v", data, err)
	}
	if !strings.Contains(run.stdout, "FAKELLM-DONE") {
		t.Errorf("final text missing from stdout:\n%s", run.stdout)
	}
	var turns []int
	for _, r := range srv.Requests() {
		if r.Conversation == 0 {
			if !strings.HasSuffix(r.Path, wantPath) {
				t.Errorf("request to %s, want %s", r.Path, wantPath)
			}
			turns = append(turns, r.Turn)
		}
	}
	if len(turns) != 2 || turns[0] != 0 || turns[1] != 1 {
		t.Errorf("scripted turns served %v, want [0 1]; requests:\n%+v", turns, srv.Requests())
	}
}

func newCLIServer(t *testing.T, s Script) *Server {
	t.Helper()
	srv, err := New(s, Options{LogPath: filepath.Join(t.TempDir(), "requests.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func TestClaudeCLI(t *testing.T) {
	t.Parallel()
	bin := cliBin(t, "claude")
	srv := newCLIServer(t, shellScript(t, "Bash", `{"command": "echo hi > marker.txt", "description": "write marker"}`))
	home, proj := t.TempDir(), t.TempDir()
	run := runCLI(t, proj, ClaudeEnv(home, srv.URL()), bin,
		"-p", "write the marker", "--output-format", "json", "--allowedTools", "Bash")
	checkRun(t, srv, proj, run, "/v1/messages")
}

func TestCodexCLI(t *testing.T) {
	t.Parallel()
	bin := cliBin(t, "codex")
	srv := newCLIServer(t, shellScript(t, "exec_command", `{"cmd": "echo hi > marker.txt"}`))
	proj := t.TempDir()
	env, err := CodexHome(t.TempDir(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	run := runCLI(t, proj, env, bin,
		"exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "write the marker")
	checkRun(t, srv, proj, run, "/v1/responses")
}

func TestGeminiCLI(t *testing.T) {
	t.Parallel()
	bin := cliBin(t, "gemini")
	srv := newCLIServer(t, shellScript(t, "run_shell_command", `{"command": "echo hi > marker.txt", "description": "write marker"}`))
	home, proj := t.TempDir(), t.TempDir()
	env, err := GeminiEnv(home, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	run := runCLI(t, proj, env, bin, "-p", "write the marker", "--output-format", "json", "--yolo")
	checkRun(t, srv, proj, run, ":streamGenerateContent")
}
