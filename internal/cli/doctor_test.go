package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
	d := realCLIs(t, "http://127.0.0.1:9") // never called
	doc := d.doctor(t, 0)
	got := checksByName(doc)
	for name, v := range d.versions {
		c := got[name]
		if c.Level != preflight.OK || !strings.Contains(c.Detail, ", version ") || !strings.Contains(c.Detail, v) {
			t.Errorf("%s: want ok with version %s, got %+v", name, v, c)
		}
		if l := got[name+" login"]; l.Level != preflight.OK {
			t.Errorf("%s login: want ok, got %+v", name, l)
		}
	}
	if !doc.Success || got["worktrees"].Level != preflight.OK {
		t.Errorf("want success with a worktree made, got %+v", doc)
	}
}

// aot doctor --online sends one request through each real CLI: answered
// by the fake model, each is ok; refused with a 401, each is an error
// with the CLI's words.
func TestDoctorOnline(t *testing.T) {
	answer, err := fakellm.New(fakellm.Script{}, fakellm.Options{MaxRequests: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer answer.Close()
	d := realCLIs(t, answer.URL())
	got := checksByName(d.doctor(t, 0, "--online"))
	for name := range d.versions {
		if c := got[name+" request"]; c.Level != preflight.OK || !strings.Contains(c.Detail, "the model answered one request") {
			t.Errorf("%s request: want ok, got %+v", name, c)
		}
	}
	protocols := map[string]bool{}
	for _, r := range answer.Requests() {
		protocols[r.Protocol] = true
	}
	if len(protocols) < 3 {
		t.Errorf("want requests in three protocols, got %v", protocols)
	}

	script, err := fakellm.ParseScript([]byte(`{"conversations": [{"match": "", "turns": [{"type": "error", "status": 401, "message": "invalid x-api-key"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	refuse, err := fakellm.New(script, fakellm.Options{MaxRequests: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer refuse.Close()
	d = realCLIs(t, refuse.URL())
	doc := d.doctor(t, 1, "--online")
	got = checksByName(doc)
	for name := range d.versions {
		// The CLI's own words, at once (not a deadline's).
		c := got[name+" request"]
		if c.Level != preflight.Error || !strings.Contains(c.Detail, "one request failed: ") || strings.Contains(c.Detail, "no answer within") {
			t.Errorf("%s request: want an error with its cause, got %+v", name, c)
		}
		t.Logf("%s: %s", name, c.Detail)
	}
}

// cliSetup is a project and a HOME where aot doctor finds the real CLIs,
// each pointed at the fake model server at one URL.
type cliSetup struct {
	aot, proj string
	env       []string
	versions  map[string]string // agent -> the version its package says
}

func realCLIs(t *testing.T, url string) cliSetup {
	t.Helper()
	aot, err := exec.LookPath("aot") // set up by TestMain
	if err != nil {
		t.Fatal(err)
	}
	home, proj := t.TempDir(), t.TempDir()
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
	versions := map[string]string{}
	for _, name := range []string{"claude", "codex", "gemini"} {
		p, err := fakellm.CLIPath(name)
		if err != nil {
			t.Fatal(err) // never a skip: CI installs them (make agent-clis)
		}
		path = append(path, filepath.Dir(p))
		versions[name] = packageVersion(t, p)
	}
	env = append(env, "HOME="+home, "XDG_CACHE_HOME=", "PATH="+strings.Join(append(path, os.Getenv("PATH")), string(os.PathListSeparator)))
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "start"}} {
		if out, err := exec.Command("git", append([]string{"-C", proj}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return cliSetup{aot: aot, proj: proj, env: env, versions: versions}
}

// doctor runs aot doctor --json on every CLI, one role each, and wants
// exit code code.
func (s cliSetup) doctor(t *testing.T, code int, args ...string) doctorDoc {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.aot, append([]string{"doctor", "--json", "--agent", "claude", "--role", "judge=codex", "--role", "planner=gemini"}, args...)...)
	cmd.Dir, cmd.Env = s.proj, s.env
	out, err := cmd.Output()
	if got := cmd.ProcessState.ExitCode(); got != code {
		t.Fatalf("aot doctor %v: exit %d (%v), want %d\n%s", args, got, err, code, out)
	}
	var doc doctorDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return doc
}

func checksByName(doc doctorDoc) map[string]preflight.Check {
	got := map[string]preflight.Check{}
	for _, c := range doc.Checks {
		got[c.Name] = c
	}
	return got
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
