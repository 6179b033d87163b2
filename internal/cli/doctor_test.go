package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/aot-loop/aot/internal/fakellm"
	"github.com/aot-loop/aot/internal/preflight"
)

// TestDoctorScripts runs testdata/doctor/*.txtar: aot doctor and the
// preflight of aot run on a PATH the script chooses. $AOT_BIN_DIR holds aot
// alone and $TOOLS git and sh alone, so a script puts exactly the programs
// it means on PATH (a CLI missing, git missing).
func TestDoctorScripts(t *testing.T) {
	aot, err := exec.LookPath("aot") // set up by TestMain
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]string{}
	for _, name := range []string{"git", "sh"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s is needed: %v", name, err)
		}
		tools[name] = p
	}
	testscript.Run(t, testscript.Params{
		Dir:       "testdata/doctor",
		Condition: scriptCondition,
		Setup: func(env *testscript.Env) error {
			dir := filepath.Join(env.WorkDir, ".tools")
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			for name, p := range tools {
				if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
					return err
				}
			}
			env.Setenv("TOOLS", dir)
			env.Setenv("AOT_BIN_DIR", filepath.Dir(aot))
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("XDG_CACHE_HOME", "")
			env.Setenv("NO_COLOR", "1")
			env.Setenv(envStateFile, "")
			for _, k := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR",
				"CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY", "CODEX_HOME", "CODEX_API_KEY",
				"OPENAI_API_KEY", "GEMINI_API_KEY", "TEMPORAL_ADDRESS", "AOT_WORKTREE_DIR", "AOT_AGENT_COMMAND"} {
				env.Setenv(k, "")
			}
			return nil
		},
	})
}

// TestDoctorRealCLIs: aot doctor finds the real Claude Code, Codex and
// Gemini CLI (make agent-clis) on PATH, reports the versions their packages
// were installed at, and finds each one's login as the fake-server tests
// configure it. Nothing is sent to a model.
func TestDoctorRealCLIs(t *testing.T) {
	aot, err := exec.LookPath("aot") // set up by TestMain
	if err != nil {
		t.Fatal(err)
	}
	home, proj := t.TempDir(), t.TempDir()
	const url = "http://127.0.0.1:9" // never called
	env := []string{"NO_COLOR=1", "LANG=C.UTF-8", "TMPDIR=" + os.TempDir()}
	env = append(env, fakellm.ClaudeEnv(home, url)...)
	codex, err := fakellm.CodexHome(filepath.Join(home, "codex"), url)
	if err != nil {
		t.Fatal(err)
	}
	gemini, err := fakellm.GeminiEnv(home, url)
	if err != nil {
		t.Fatal(err)
	}
	env = append(append(env, codex...), gemini...)
	path := []string{filepath.Dir(aot)}
	want := map[string]string{} // agent -> the version its package says
	for _, name := range []string{"claude", "codex", "gemini"} {
		p, err := fakellm.CLIPath(name)
		if err != nil {
			t.Fatal(err) // never a skip: CI installs them (make agent-clis)
		}
		path = append(path, filepath.Dir(p))
		want[name] = packageVersion(t, p)
	}
	env = append(env, "HOME="+home, "XDG_CACHE_HOME=", "PATH="+strings.Join(append(path, os.Getenv("PATH")), string(os.PathListSeparator)))
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "start"}} {
		if out, err := exec.Command("git", append([]string{"-C", proj}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	cmd := exec.Command(aot, "doctor", "--json", "--agent", "claude", "--role", "judge=codex", "--role", "planner=gemini")
	cmd.Dir, cmd.Env = proj, env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("aot doctor: %v\n%s", err, out)
	}
	var doc doctorDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]preflight.Check{}
	for _, c := range doc.Checks {
		got[c.Name] = c
	}
	for name, v := range want {
		c := got[name]
		if c.Level != preflight.OK || !strings.Contains(c.Detail, ", version ") || !strings.Contains(c.Detail, v) {
			t.Errorf("%s: want ok with version %s, got %+v", name, v, c)
		}
		if l := got[name+" login"]; l.Level != preflight.OK {
			t.Errorf("%s login: want ok, got %+v", name, l)
		}
	}
	if !doc.Success || got["worktrees"].Level != preflight.OK {
		t.Errorf("want success with a worktree made, got:\n%s", out)
	}
}

// packageVersion is the x.y.z of the npm package holding the CLI at bin.
func packageVersion(t *testing.T, bin string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	for dir := filepath.Dir(real); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		data, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			continue
		}
		var pkg struct{ Version string }
		if err := json.Unmarshal(data, &pkg); err != nil {
			t.Fatal(err)
		}
		if v := regexp.MustCompile(`\d+\.\d+\.\d+`).FindString(pkg.Version); v != "" {
			return v
		}
	}
	t.Fatalf("no package.json with a version above %s", real)
	return ""
}
