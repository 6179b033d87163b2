package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aot-loop/aot/internal/fakellm"
	"github.com/aot-loop/aot/internal/plugin"
)

// aot plugin install writes files and never touches the state file.
func init() { stateFree = append(stateFree, "aot plugin install") }

// TestPluginValidatesWithClaudeCode installs the plugin and has the real
// Claude Code validate it strictly (warnings fail too), and checks that it
// lists every command, agent, skill and hook.
func TestPluginValidatesWithClaudeCode(t *testing.T) {
	claude, err := fakellm.CLIPath("claude")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "aot-loop")
	if _, err := plugin.InstallClaude(dir, "aot", false); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(claude, "plugin", "validate", "--strict", dir)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), fakellm.ClaudeEnv(home, "http://127.0.0.1:9")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude plugin validate --strict %s: %v\n%s", dir, err, out)
	}
	for _, want := range []string{
		"commands: aot-loop:align-goal", "commands: aot-loop:enter-recursion", "commands: aot-loop:exit-recursion",
		"commands: aot-loop:redirect", "commands: aot-loop:loop-status",
		"agents: aot-loop:probe", "agents: aot-loop:worker", "agents: aot-loop:verifier",
		"skills: aot-loop:aot-state",
		`Stop command "aot hook claude stop || true"`, `SubagentStop command "aot hook claude subagent-stop || true"`,
		`PreToolUse * command "aot hook claude pre-tool-use || true"`,
		"Validation passed",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("claude plugin validate does not report %q:\n%s", want, out)
		}
	}
}

func TestThePluginRunsTheAotHookBesideAot(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"aot", "aot-hook"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", t.TempDir()) // no aot-hook on PATH
	exe := func() (string, error) { return filepath.Join(dir, "aot"), nil }
	if got, err := resolveAotBin("", exe); err != nil || got != filepath.Join(dir, "aot-hook") {
		t.Errorf("beside aot: %q %v", got, err)
	}
	os.Remove(filepath.Join(dir, "aot-hook"))
	if got, _ := resolveAotBin("", exe); got != "aot" {
		t.Errorf("without aot-hook: %q", got)
	}
}
