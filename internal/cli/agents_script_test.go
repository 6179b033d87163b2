package cli

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/aot-loop/aot/internal/fakellm"
)

// TestAgentScripts runs testdata/agents/*.txtar: aot run with the real agent
// CLIs (Claude Code, Codex, Gemini CLI, installed by make agent-clis) and
// the LLM endpoints, against the project's fake model server. The CLIs'
// tool calls really run; assertions are on files, state, journal and the
// requests the server logged.
func TestAgentScripts(t *testing.T) {
	var path []string
	for _, name := range []string{"claude", "codex", "gemini"} {
		p, err := fakellm.CLIPath(name)
		if err != nil {
			t.Fatal(err)
		}
		path = append(path, filepath.Dir(p))
	}
	cmds := map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"fakellm": cmdFakeLLM,
		"waitfor": cmdWaitFor,
		"pidgone": cmdPIDGone,
	}
	maps.Copy(cmds, stateScriptCmds())
	testscript.Run(t, testscript.Params{
		Dir:       "testdata/agents",
		Cmds:      cmds,
		Condition: scriptCondition,
		Setup: func(env *testscript.Env) error {
			env.Setenv("NO_COLOR", "1")
			env.Setenv(envStateFile, "")
			// The CLIs are found on PATH as a person's would be.
			env.Setenv("PATH", strings.Join(path, string(os.PathListSeparator))+string(os.PathListSeparator)+env.Getenv("PATH"))
			return nil
		},
	})
}

// fakellm SCRIPT starts the fake model server with the script file SCRIPT
// (closed when the script ends), logs its requests to $WORK/requests.jsonl,
// and points every CLI and endpoint at it with HOME=$WORK/home: Claude
// Code's environment, a CODEX_HOME config, Gemini's settings, and
// OPENAI_BASE_URL / ANTHROPIC_BASE_URL for the LLM backends. $FAKE_URL is
// the server's address.
func cmdFakeLLM(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fakellm SCRIPT")
	}
	sc, err := fakellm.LoadScript(ts.MkAbs(args[0]))
	ts.Check(err)
	srv, err := fakellm.New(sc, fakellm.Options{LogPath: ts.MkAbs("requests.jsonl"), MaxRequests: 500})
	ts.Check(err)
	ts.Defer(func() { srv.Close() })
	home := ts.MkAbs("home")
	ts.Check(os.MkdirAll(home, 0o755))
	env := fakellm.ClaudeEnv(home, srv.URL())
	codex, err := fakellm.CodexHome(home, srv.URL())
	ts.Check(err)
	gemini, err := fakellm.GeminiEnv(home, srv.URL())
	ts.Check(err)
	env = append(env, codex...)
	env = append(env, gemini...)
	env = append(env,
		"FAKE_URL="+srv.URL(),
		"OPENAI_BASE_URL="+srv.URL()+"/v1",
		"OPENAI_API_KEY=fake",
	)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		ts.Setenv(k, v)
	}
}
