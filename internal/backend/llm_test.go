package backend

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/fakellm"
	"github.com/aot-loop/aot/internal/prompt"
)

// llmAPI is one way of reaching a model: a backend and its args.
type llmAPI struct {
	name     string // test name
	backend  string
	args     []string
	path     string // the request path the fake server sees
	protocol string
}

var llmAPIs = []llmAPI{
	{"openai-chat", "openai", nil, "/chat/completions", fakellm.Chat},
	{"openai-responses", "openai", []string{"api=responses"}, "/responses", fakellm.Responses},
	{"anthropic", "anthropic", nil, "/v1/messages", fakellm.Anthropic},
}

// llmServer runs the fake model server for a script until the test ends.
func llmServer(t *testing.T, script string) *fakellm.Server {
	t.Helper()
	s, err := fakellm.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fakellm.New(s, fakellm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// llmLog collects an attempt's log.
type llmLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *llmLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *llmLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *llmLog) Close() error { return nil }

// llmAgent builds api's agent against srv, with keys in its own
// environment (never the test process's).
func llmAgent(t *testing.T, api llmAPI, srv *fakellm.Server, timeout time.Duration) (agent.Agent, *llmLog) {
	t.Helper()
	vars := map[string]string{"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"}
	log := &llmLog{}
	env := Env{
		Getenv:  func(k string) string { return vars[k] },
		Prompts: prompt.Renderer{},
		Timeout: timeout,
		Log:     func(agent.Task) (io.WriteCloser, error) { return log, nil },
	}
	a, err := factories[api.backend](Spec{Agent: api.backend, Model: "test-model", BaseURL: srv.URL(), Args: api.args}, env)
	if err != nil {
		t.Fatal(err)
	}
	return a, log
}

func llmCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// judgeTask is a quality check of one file in a fresh workdir.
func judgeTask(t *testing.T, marker string) agent.Task {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.go"), []byte("package hello // HELLO-CONTENT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return agent.Task{Role: agent.Judge, Workdir: dir, Files: []string{"hello.go"},
		Atom:      agent.AtomRef{ID: "Q1", Description: "readable code " + marker},
		Objective: agent.Objective{Goal: "a readable hello package"},
		Check:     map[string]any{"type": "quality", "scope": "*.go"}}
}

func TestLLMJudgeScoresThroughEachAPI(t *testing.T) {
	for _, api := range llmAPIs {
		t.Run(api.name, func(t *testing.T) {
			srv := llmServer(t, `{"conversations": [{"match": "JUDGE-ME", "turns": [
				[{"type": "final", "json": {"passed": true, "evidence": "clear names",
				  "scores": [{"criterion": "Readability", "score": 4, "rationale": "short"}]}}]]}]}`)
			a, log := llmAgent(t, api, srv, 0)
			var acts []agent.Activity
			ctx := agent.WithActivity(llmCtx(t), func(a agent.Activity) { acts = append(acts, a) })

			r, err := a.Run(ctx, judgeTask(t, "JUDGE-ME"))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !r.Passed || r.Evidence != "clear names" {
				t.Errorf("Result = %+v, want passed with the evidence", r)
			}
			if diff := cmp.Diff([]agent.Score{{Criterion: "Readability", Score: 4, Rationale: "short"}}, r.Scores); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
			if want := (agent.Usage{InputTokens: 100, OutputTokens: 20, Known: true}); r.Usage != want {
				t.Errorf("usage = %+v, want %+v", r.Usage, want)
			}
			if diff := cmp.Diff([]agent.Activity{{Tool: "model", Detail: "test-model request"}}, acts); diff != "" {
				t.Errorf("activity (-want +got):\n%s", diff)
			}

			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1: %+v", len(reqs), reqs)
			}
			q := reqs[0]
			if q.Path != api.path || q.Protocol != api.protocol || q.Model != "test-model" || q.Stream {
				t.Errorf("request %s %s model %q stream %v, want %s %s model test-model, not streamed", q.Protocol, q.Path, q.Model, q.Stream, api.protocol, api.path)
			}
			for _, want := range []string{"You are the judge", "readable code JUDGE-ME", "----- BEGIN hello.go -----\npackage hello // HELLO-CONTENT"} {
				if !strings.Contains(q.FirstUser, want) {
					t.Errorf("the prompt lacks %q:\n%s", want, q.FirstUser)
				}
			}
			if !strings.Contains(q.System, "no tools") {
				t.Errorf("system = %q, want it to say there are no tools", q.System)
			}
			if len(q.Tools) != 0 {
				t.Errorf("tools offered: %v", q.Tools)
			}
			if api.backend == "openai" && !bytes.Contains(q.Body, []byte(`"json_schema"`)) {
				t.Errorf("no json_schema response format in %s", q.Body)
			}
			if api.backend == "anthropic" && q.Header["x-api-key"] == "" || api.backend == "openai" && q.Header["authorization"] == "" {
				t.Errorf("no key sent: %v", q.Header)
			}
			if l := log.String(); !strings.Contains(l, "HELLO-CONTENT") || !strings.Contains(l, "clear names") {
				t.Errorf("the attempt log lacks the prompt or the answer:\n%s", l)
			}
		})
	}
}

func TestLLMPlannerProposesAtoms(t *testing.T) {
	plan := `{"atoms": [{"id": "N1", "description": "add tests", "depends_on": ["A1"]}]}`
	for _, tc := range []struct {
		api   llmAPI
		reply string
	}{
		// Structured output gives the object alone.
		{llmAPIs[0], `{"type": "final", "json": ` + plan + `}`},
		// Without it, the answer is found after the model's prose.
		{llmAPIs[2], `{"type": "text", "text": ` + strconv.Quote("Here is my plan:\n```json\n"+plan+"\n```") + `}`},
	} {
		t.Run(tc.api.name, func(t *testing.T) {
			srv := llmServer(t, `{"conversations": [{"match": "You are the planner", "turns": [[`+tc.reply+`]]}]}`)
			a, _ := llmAgent(t, tc.api, srv, 0)
			r, err := a.Run(llmCtx(t), agent.Task{Role: agent.Planner, Objective: agent.Objective{Goal: "ship"},
				Atom: agent.AtomRef{ID: "A1", Description: "the feature"}, Failures: []string{"no tests"}})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff([]agent.PlannedAtom{{ID: "N1", Description: "add tests", DependsOn: []string{"A1"}}}, r.Atoms); diff != "" {
				t.Errorf("atoms (-want +got):\n%s", diff)
			}
			if !r.OK(agent.Planner) {
				t.Error("a plan with an atom is not OK")
			}
		})
	}
}

func TestLLMMalformedAnswer(t *testing.T) {
	for _, tc := range []struct {
		api   llmAPI
		reply string
		want  string
	}{
		// The fake fills a requested schema when the reply is not JSON, so
		// the OpenAI case answers JSON of the wrong shape.
		{llmAPIs[0], `{"type": "text", "text": "{\"verdict\": \"good\"}"}`, `no "passed" key`},
		{llmAPIs[2], `{"type": "text", "text": "I think it looks fine."}`, `I think it looks fine.`},
	} {
		t.Run(tc.api.name, func(t *testing.T) {
			srv := llmServer(t, `{"conversations": [{"match": "JUDGE-ME", "turns": [[`+tc.reply+`]]}]}`)
			a, _ := llmAgent(t, tc.api, srv, 0)
			_, err := a.Run(llmCtx(t), judgeTask(t, "JUDGE-ME"))
			var ae *agent.AttemptError
			if !errors.As(err, &ae) || ae.Kind != agent.KindMalformed {
				t.Fatalf("err = %v, want a %s", err, agent.KindMalformed)
			}
			if !strings.Contains(ae.Reason, tc.want) {
				t.Errorf("reason %q lacks %q", ae.Reason, tc.want)
			}
			if !ae.Usage.Known || ae.Usage.InputTokens != 100 {
				t.Errorf("usage of the failed attempt = %+v, want the reported tokens", ae.Usage)
			}
		})
	}
}

func TestLLMRateLimitIsTransientWithRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		api    llmAPI
		status int
	}{{llmAPIs[0], 429}, {llmAPIs[1], 503}, {llmAPIs[2], 529}} {
		t.Run(tc.api.name, func(t *testing.T) {
			// A persistent outage: only our engine's backoff may retry.
			srv := llmServer(t, `{"conversations": [{"match": "JUDGE-ME", "turns": [
				{"type": "error", "status": `+strconv.Itoa(tc.status)+`, "retry_after": "7"}]}]}`)
			a, _ := llmAgent(t, tc.api, srv, 0)
			_, err := a.Run(llmCtx(t), judgeTask(t, "JUDGE-ME"))
			ae, ok := agent.Transient(err)
			if !ok {
				t.Fatalf("err = %v, want a transient %s", err, agent.KindRateLimit)
			}
			if ae.RetryAfter != 7*time.Second {
				t.Errorf("RetryAfter = %s, want 7s", ae.RetryAfter)
			}
			if !strings.Contains(ae.Reason, strconv.Itoa(tc.status)) {
				t.Errorf("reason %q does not name the status", ae.Reason)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1: the SDK must not retry by itself", n)
			}
		})
	}
}

func TestLLMUsageLimitPausesTheLoop(t *testing.T) {
	for _, tc := range []struct {
		api     llmAPI
		retryAt bool // the error says when the quota resets
	}{{llmAPIs[0], false}, {llmAPIs[1], true}, {llmAPIs[2], true}} {
		t.Run(tc.api.name, func(t *testing.T) {
			srv := llmServer(t, `{"conversations": [{"match": "JUDGE-ME", "turns": [
				{"type": "error", "kind": "usage_limit"}]}]}`)
			a, _ := llmAgent(t, tc.api, srv, 0)
			r, err := a.Run(llmCtx(t), judgeTask(t, "JUDGE-ME"))
			if err != nil {
				t.Fatalf("Run: %v, want a usage-limit result", err)
			}
			if !r.UsageLimit {
				t.Fatalf("Result = %+v, want UsageLimit", r)
			}
			if !tc.retryAt {
				return
			}
			at, err := time.Parse(time.RFC3339, r.RetryAt)
			if err != nil || at.Before(time.Now()) || at.After(time.Now().Add(2*time.Hour)) {
				t.Errorf("RetryAt = %q, want the reset time about an hour ahead", r.RetryAt)
			}
		})
	}
}

func TestLLMOtherAPIErrorIsTheAgents(t *testing.T) {
	srv := llmServer(t, `{"conversations": [{"match": "JUDGE-ME", "turns": [
		{"type": "error", "status": 400, "message": "model test-model does not exist"}]}]}`)
	for _, api := range []llmAPI{llmAPIs[0], llmAPIs[2]} {
		a, _ := llmAgent(t, api, srv, 0)
		_, err := a.Run(llmCtx(t), judgeTask(t, "JUDGE-ME"))
		var ae *agent.AttemptError
		if !errors.As(err, &ae) || ae.Kind != agent.KindAgent || !strings.Contains(ae.Reason, "400") ||
			!strings.Contains(ae.Reason, "does not exist") {
			t.Errorf("%s: err = %v, want an %s naming the status and the message", api.name, err, agent.KindAgent)
		}
	}
}

func TestLLMTimeout(t *testing.T) {
	srv := llmServer(t, `{"conversations": [{"match": "JUDGE-ME", "turns": [
		{"blocks": [{"type": "text", "text": "late"}], "delay_ms": 10000}]}]}`)
	a, _ := llmAgent(t, llmAPIs[2], srv, 300*time.Millisecond)
	start := time.Now()
	_, err := a.Run(llmCtx(t), judgeTask(t, "JUDGE-ME"))
	var ae *agent.AttemptError
	if !errors.As(err, &ae) || ae.Kind != agent.KindTimeout {
		t.Fatalf("err = %v, want a %s", err, agent.KindTimeout)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the timeout took %s", d)
	}
}

func TestLLMRefusesRolesThatNeedTools(t *testing.T) {
	srv := llmServer(t, `{"conversations": []}`)
	for _, role := range []agent.Role{agent.Worker, agent.Probe, agent.Verifier} {
		a, _ := llmAgent(t, llmAPIs[0], srv, 0)
		_, err := a.Run(llmCtx(t), agent.Task{Role: role, Atom: agent.AtomRef{ID: "A1"}})
		var ae *agent.AttemptError
		if !errors.As(err, &ae) || ae.Kind != agent.KindCrash ||
			!strings.Contains(ae.Reason, "the openai backend has no tools: it can run the planner, judge and align roles, not "+string(role)) {
			t.Errorf("%s: err = %v, want a crash saying the backend has no tools", role, err)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests for roles the backend refuses", n)
	}
}

func TestLLMSettings(t *testing.T) {
	env := func(vars map[string]string) Env { return Env{Getenv: func(k string) string { return vars[k] }} }
	keys := env(map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "MY_KEY": "k"})
	for _, tc := range []struct {
		name string
		spec Spec
		env  Env
		want string // "" for no error
	}{
		{"openai needs a model", Spec{Agent: "openai"}, keys, `no model: the openai backend needs "model:"`},
		{"anthropic needs a model", Spec{Agent: "anthropic"}, keys, `no model: the anthropic backend needs "model:"`},
		{"openai needs a key", Spec{Agent: "openai", Model: "m"}, env(nil), "$OPENAI_API_KEY is empty"},
		{"a local endpoint needs none", Spec{Agent: "openai", Model: "m", BaseURL: "http://127.0.0.1:11434/v1"}, env(nil), ""},
		{"anthropic needs a key", Spec{Agent: "anthropic", Model: "m", BaseURL: "http://x"}, env(nil), "$ANTHROPIC_API_KEY is empty"},
		{"the key's variable is named", Spec{Agent: "anthropic", Model: "m", APIKeyEnv: "OTHER"}, keys, "$OTHER is empty"},
		{"a named variable", Spec{Agent: "openai", Model: "m", APIKeyEnv: "MY_KEY"}, keys, ""},
		{"an auth token", Spec{Agent: "anthropic", Model: "m"}, env(map[string]string{"ANTHROPIC_AUTH_TOKEN": "t"}), ""},
		{"args", Spec{Agent: "openai", Model: "m", Args: []string{"api=responses", "response_format=none", "max_tokens=100"}}, keys, ""},
		{"unknown arg", Spec{Agent: "anthropic", Model: "m", Args: []string{"api=responses"}}, keys, `unknown key "api" (the anthropic backend takes max_tokens=N)`},
		{"bad api", Spec{Agent: "openai", Model: "m", Args: []string{"api=completions"}}, keys, "api is chat"},
		{"not key=value", Spec{Agent: "openai", Model: "m", Args: []string{"--fast"}}, keys, "key=value"},
		{"bad max_tokens", Spec{Agent: "anthropic", Model: "m", Args: []string{"max_tokens=lots"}}, keys, "positive integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := factories[tc.spec.Agent](tc.spec, tc.env)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestLLMJudgeFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("big.txt", bytes.Repeat([]byte("a"), maxFileShown+10))
	write("bin.dat", []byte{0, 1, 2})
	for i := range 5 {
		write("f"+strconv.Itoa(i)+".txt", bytes.Repeat([]byte("b"), maxFileShown-1))
	}
	secret := filepath.Join(filepath.Dir(dir), "outside.txt")
	got := llmWithFiles("prompt\n## Your answer\nformat\n", dir,
		[]string{"big.txt", "bin.dat", "missing.txt", "../outside.txt", secret, "f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt"})

	for _, want := range []string{
		"----- END big.txt (truncated: only its first 65536 bytes are shown) -----",
		"bin.dat: binary, not shown",
		"missing.txt: cannot be read",
		"../outside.txt: cannot be read",
		"----- END f2.txt -----",
		"----- END f3.txt (truncated: only its first 3 bytes are shown) -----",
		"f4.txt: not shown (the 256 KiB for all files are spent)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
	if !strings.HasPrefix(got, "prompt\n## The contents of those files\n") || !strings.HasSuffix(got, "\n## Your answer\nformat\n") {
		t.Errorf("the files are not put before the answer section:\n%.300s ... %s", got, got[len(got)-100:])
	}
	if len(got) > maxFilesShown+4096 {
		t.Errorf("the prompt grew by %d bytes, over the %d budget", len(got), maxFilesShown)
	}
}
