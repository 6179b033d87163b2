package backend

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/fakellm"
	"github.com/aot-loop/aot/internal/proc"
)

// geminiHarness runs the real Gemini CLI against a fake model server, with
// its own HOME, port and a 60 s deadline. Gemini takes several seconds a
// run, so each test makes one run and checks everything about it.
type geminiHarness struct {
	srv  *fakellm.Server
	g    *Gemini
	work string

	mu   sync.Mutex
	acts []agent.Activity
	tree proc.Tree
	log  strings.Builder
}

func newGeminiHarness(t *testing.T, script string) *geminiHarness {
	t.Helper()
	bin, err := fakellm.CLIPath("gemini")
	if err != nil {
		t.Fatal(err)
	}
	s, err := fakellm.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fakellm.New(s, fakellm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	home, tmp, work := t.TempDir(), t.TempDir(), t.TempDir()
	env, err := fakellm.GeminiEnv(home, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	// Folder trust as a user has it (on, nothing trusted): the backend's
	// own flags must make the run work.
	settings := filepath.Join(home, ".gemini", "settings.json")
	var m map[string]map[string]any
	data, err := os.ReadFile(settings)
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	m["security"]["folderTrust"] = map[string]any{"enabled": true}
	data, _ = json.Marshal(m)
	if err := os.WriteFile(settings, data, 0o644); err != nil {
		t.Fatal(err)
	}
	env = append(env, "GEMINI_CLI_TRUST_WORKSPACE=", "TMPDIR="+tmp)

	h := &geminiHarness{srv: srv, work: work}
	h.g = &Gemini{Bin: bin, Env: env, Timeout: 50 * time.Second, Log: func(agent.Task) (io.WriteCloser, error) {
		return nopCloser{h}, nil
	}}
	return h
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (h *geminiHarness) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.Write(p)
}

// run runs a task of role whose atom is described by desc.
func (h *geminiHarness) run(t *testing.T, role agent.Role, desc string) (agent.Result, error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx = agent.WithActivity(ctx, func(a agent.Activity) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.acts = append(h.acts, a)
	})
	ctx = agent.WithStart(ctx, func(tr proc.Tree) { h.tree = tr })
	task := agent.Task{Role: role, Workdir: h.work, Attempt: 1,
		Atom:      agent.AtomRef{ID: "A1", Description: desc},
		Objective: agent.Objective{Goal: "exercise the gemini backend: " + desc[:min(len(desc), 40)]}}
	start := time.Now()
	r, err := h.g.Run(ctx, task)
	return r, err, time.Since(start)
}

// mainRequests are the requests of the agent's own conversation (not the
// router's).
func (h *geminiHarness) mainRequests() []fakellm.Request {
	var out []fakellm.Request
	for _, r := range h.srv.Requests() {
		if r.Conversation >= 0 {
			out = append(out, r)
		}
	}
	return out
}

func geminiKind(t *testing.T, err error, want agent.Kind) *agent.AttemptError {
	t.Helper()
	var ae *agent.AttemptError
	if !errors.As(err, &ae) || ae.Kind != want {
		t.Fatalf("err = %#v, want an AttemptError of kind %s", err, want)
	}
	return ae
}

func TestGeminiWorkerWritesFilesAndAnswers(t *testing.T) {
	h := newGeminiHarness(t, `{"conversations":[{"match":"GEMINI-WORKER-ATOM","require_tools":true,"turns":[
		[{"type":"tool_use","name":"write_file","input":{"file_path":"hello.txt","content":"hello\n"}}],
		[{"type":"tool_use","name":"run_shell_command","input":{"command":"echo shell > shell.txt","description":"write shell.txt"}}],
		[{"type":"text","text":"Both written.\n{\"success\": true, \"summary\": \"wrote two files\", \"artifacts\": [\"hello.txt\", \"shell.txt\"]}"}]]}]}`)
	// A prompt past the 128 KiB argument limit: it goes on stdin.
	desc := "GEMINI-WORKER-ATOM " + strings.Repeat("pad ", 40<<10) + "END-OF-PROMPT"
	r, err, took := h.run(t, agent.Worker, desc)
	if err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, h.log.String())
	}
	t.Logf("worker run took %s", took)
	if !r.Success || r.Summary != "wrote two files" || !slices.Equal(r.Artifacts, []string{"hello.txt", "shell.txt"}) || r.ToolCalls != 2 {
		t.Errorf("result = %+v", r)
	}
	for name, want := range map[string]string{"hello.txt": "hello\n", "shell.txt": "shell\n"} {
		if got, err := os.ReadFile(filepath.Join(h.work, name)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	// The router call and three turns, 100 in and 20 out each by default.
	if !r.Usage.Known || r.Usage.InputTokens != 400 || r.Usage.OutputTokens != 80 {
		t.Errorf("usage = %+v, want 400 in, 80 out, known", r.Usage)
	}
	want := []agent.Activity{{Tool: "write_file", Detail: "hello.txt"}, {Tool: "run_shell_command", Detail: "echo shell > shell.txt"}}
	if !slices.Equal(h.acts, want) {
		t.Errorf("activity = %+v, want %+v", h.acts, want)
	}
	reqs := h.mainRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests of the agent's conversation, want 3: %+v", len(reqs), reqs)
	}
	if !strings.Contains(reqs[0].FirstUser, "END-OF-PROMPT") {
		t.Errorf("the whole prompt did not reach the model; first user text ends %q", reqs[0].FirstUser[max(0, len(reqs[0].FirstUser)-80):])
	}
	for _, tool := range []string{"write_file", "replace", "run_shell_command"} {
		if !slices.Contains(reqs[0].Tools, tool) {
			t.Errorf("worker not offered %s: %v", tool, reqs[0].Tools)
		}
	}
	if !strings.Contains(h.log.String(), `"type":"tool_use"`) {
		t.Errorf("the attempt log lacks the event stream:\n%s", h.log.String())
	}
}

func TestGeminiProbeWritesAreRefused(t *testing.T) {
	h := newGeminiHarness(t, `{"conversations":[{"match":"GEMINI-PROBE-ATOM","require_tools":true,"turns":[
		[{"type":"tool_use","name":"write_file","input":{"file_path":"probe.txt","content":"no\n"}}],
		[{"type":"tool_use","name":"run_shell_command","input":{"command":"echo no > probe-shell.txt"}}],
		[{"type":"tool_use","name":"read_file","input":{"file_path":"README"}}],
		[{"type":"text","text":"{\"feasible\": true, \"findings\": \"looked around\"}"}]]}]}`)
	if err := os.WriteFile(filepath.Join(h.work, "README"), []byte("read me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err, _ := h.run(t, agent.Probe, "GEMINI-PROBE-ATOM")
	if err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, h.log.String())
	}
	if !r.Feasible || r.Findings != "looked around" || r.ToolCalls != 3 {
		t.Errorf("result = %+v", r)
	}
	for _, name := range []string{"probe.txt", "probe-shell.txt"} {
		if _, err := os.Stat(filepath.Join(h.work, name)); !os.IsNotExist(err) {
			t.Errorf("a probe wrote %s (stat: %v)", name, err)
		}
	}
	reqs := h.mainRequests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests of the agent's conversation, want 4", len(reqs))
	}
	for _, tool := range []string{"write_file", "replace", "run_shell_command"} {
		if slices.Contains(reqs[0].Tools, tool) {
			t.Errorf("probe offered %s: %v", tool, reqs[0].Tools)
		}
	}
	if !slices.Contains(reqs[0].Tools, "read_file") {
		t.Errorf("probe not offered read_file: %v", reqs[0].Tools)
	}
	// The read went through, the writes were refused back to the model.
	if !strings.Contains(reqs[3].Tail, "read me") || !strings.Contains(reqs[1].Tail, "not found") {
		t.Errorf("tool results sent to the model: %q, %q", reqs[1].Tail, reqs[3].Tail)
	}
	// Each refused call shows right after it, as a refusal naming the file
	// or the command.
	if len(h.acts) != 5 || h.acts[0] != (agent.Activity{Tool: "write_file", Detail: "probe.txt"}) ||
		!h.acts[1].Refused || h.acts[1].Detail != "probe.txt" || !h.acts[3].Refused || h.acts[3].Tool != "run_shell_command" || h.acts[4].Refused {
		t.Errorf("activity = %+v", h.acts)
	}
}

func TestGeminiMalformedAnswer(t *testing.T) {
	h := newGeminiHarness(t, `{"conversations":[{"match":"GEMINI-VERIFIER-ATOM","require_tools":true,"turns":[
		[{"type":"text","text":"I believe everything passed, no JSON today."}]]}]}`)
	_, err, _ := h.run(t, agent.Verifier, "GEMINI-VERIFIER-ATOM")
	ae := geminiKind(t, err, agent.KindMalformed)
	if !strings.Contains(ae.Reason, "I believe everything passed") || !ae.Usage.Known || ae.Usage.InputTokens == 0 {
		t.Errorf("error = %+v", ae)
	}
}

func TestGeminiRateLimitStopsItsRetries(t *testing.T) {
	// Gemini CLI retries a 429 ten times over about three minutes (5 s
	// doubling to 30 s, or from the retry delay the answer gives), printing
	// only to stderr; the backend ends the attempt at its second retry.
	h := newGeminiHarness(t, `{"conversations":[{"match":"GEMINI-JUDGE-ATOM","require_tools":true,"turns":[
		{"type":"error","status":429,"retry_after":"7"}]}]}`)
	_, err, took := h.run(t, agent.Judge, "GEMINI-JUDGE-ATOM")
	if err == nil || !strings.Contains(err.Error(), "quota") {
		t.Logf("log:\n%s", h.log.String())
	}
	ae := geminiKind(t, err, agent.KindRateLimit)
	t.Logf("rate limited after %s: %s", took, ae.Reason)
	if ae.RetryAfter != 7*time.Second || !strings.Contains(ae.Reason, "quota error") {
		t.Errorf("error = %+v, want RetryAfter 7s and a quota error", ae)
	}
	if took > 30*time.Second {
		t.Errorf("took %s", took)
	}
	if n := len(h.mainRequests()); n < 2 || n > 3 {
		t.Errorf("%d model requests, want 2 or 3", n)
	}
	if proc.Alive(h.tree) {
		t.Error("gemini still running")
	}
}

func TestGeminiUsageLimit(t *testing.T) {
	h := newGeminiHarness(t, `{"conversations":[{"match":"GEMINI-PLANNER-ATOM","require_tools":true,"turns":[
		{"type":"error","kind":"usage_limit","status":429}]}]}`)
	r, err, _ := h.run(t, agent.Planner, "GEMINI-PLANNER-ATOM")
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !r.UsageLimit || !strings.Contains(r.Summary, "daily quota") {
		t.Errorf("result = %+v, want a usage limit", r)
	}
	if _, tzErr := time.LoadLocation("America/Los_Angeles"); tzErr == nil {
		at, err := time.Parse(time.RFC3339, r.RetryAt)
		if err != nil || !at.After(time.Now()) || at.After(time.Now().Add(25*time.Hour)) {
			t.Errorf("RetryAt = %q (%v), want the next midnight Pacific time", r.RetryAt, err)
		}
	}
	if n := len(h.mainRequests()); n != 1 {
		t.Errorf("%d model requests, want 1 (a daily quota is not retried)", n)
	}
}

func TestGeminiTimeoutKillsTree(t *testing.T) {
	h := newGeminiHarness(t, `{"conversations":[{"match":"GEMINI-SLOW-ATOM","require_tools":true,"turns":[
		[{"type":"tool_use","name":"run_shell_command","input":{"command":"sleep 300"}}],
		[{"type":"text","text":"{\"success\": true}"}]]}]}`)
	// Long enough for Gemini CLI (a Node program) to start, route and call
	// its tool on a loaded machine.
	h.g.Timeout = 15 * time.Second
	_, err, took := h.run(t, agent.Worker, "GEMINI-SLOW-ATOM")
	geminiKind(t, err, agent.KindTimeout)
	if took > 30*time.Second {
		t.Errorf("took %s", took)
	}
	if h.tree.Token == "" {
		t.Fatal("the start of the tree was not reported")
	}
	if proc.Alive(h.tree) {
		t.Error("a process of the attempt survived (gemini or its sleep 300)")
	}
	if len(h.acts) != 1 || h.acts[0].Detail != "sleep 300" {
		t.Errorf("activity = %+v", h.acts)
	}
}

func TestGeminiArgsPerRole(t *testing.T) {
	g := &Gemini{Model: "gemini-2.5-pro", Args: []string{"--debug"}}
	for _, tc := range []struct {
		role agent.Role
		mode string
	}{{agent.Worker, "yolo"}, {agent.Probe, "default"}, {agent.Verifier, "default"}, {agent.Judge, "default"}, {agent.Planner, "default"}, {agent.Align, "default"}} {
		got := strings.Join(g.args(tc.role), " ")
		want := "-p  --output-format stream-json --approval-mode " + tc.mode + " --skip-trust --model gemini-2.5-pro --debug"
		if got != want {
			t.Errorf("%s: args %q, want %q", tc.role, got, want)
		}
	}
}

func TestGeminiErrorClassification(t *testing.T) {
	s := &geminiStream{}
	for _, tc := range []struct {
		msg       string
		kind      agent.Kind // "" for a usage limit
		retryAt   bool
		retryWait time.Duration
	}{
		{"[API Error: You have exhausted your daily quota on this model.]\nPlease wait and try again later.", "", true, 0},
		{"[API Error: Quota exceeded.\nSuggested retry after 3600s.]", "", true, 0},
		{"[API Error: Resource has been exhausted (e.g. check quota).]\nPlease wait and try again later.", agent.KindRateLimit, false, 0},
		{"[API Error: Too many requests. Please retry in 12.5s]", agent.KindRateLimit, false, 12500 * time.Millisecond},
		{"[API Error: The model is overloaded. Please try again later. (Status: UNAVAILABLE)]", agent.KindRateLimit, false, 0},
		{"[API Error: Invalid request (Status: INVALID_ARGUMENT)]", agent.KindAgent, false, 0},
	} {
		r, err := s.apiError(tc.msg, ProcessResult{}, agent.Usage{})
		if tc.kind == "" {
			if err != nil || !r.UsageLimit || (r.RetryAt != "") != tc.retryAt {
				t.Errorf("%q: %+v, %v; want a usage limit", tc.msg, r, err)
			}
			continue
		}
		ae := geminiKind(t, err, tc.kind)
		if ae.RetryAfter != tc.retryWait {
			t.Errorf("%q: RetryAfter %s, want %s", tc.msg, ae.RetryAfter, tc.retryWait)
		}
	}
}

func TestGeminiRetryWatch(t *testing.T) {
	for _, tc := range []struct {
		name, stderr string
		stopped      bool
		failure      string
		after        time.Duration
	}{
		{"503 twice", "Attempt 1 failed with status 503. Retrying with backoff... _ApiError: {}\nAttempt 2 failed with status 503. Retrying with backoff...\n", true, "HTTP 503", 0},
		{"429 once", "Attempt 1 failed with status 429. Retrying with backoff...\n", false, "HTTP 429", 0},
		{"quota with delay", "Attempt 1 failed: Resource has been exhausted (e.g. check quota).\nSuggested retry after 9s.. Retrying after 9400ms...\nAttempt 2 fa", false, "a quota error", 9 * time.Second},
		{"network", "Attempt 1 failed. Retrying with backoff...\nAttempt 2 failed. Retrying with backoff...\n", true, "a network error", 0},
		{"400 is not retried", "Attempt 2 failed with status 400. Retrying with backoff...\n", false, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			w := &geminiRetries{limit: 2, stop: cancel}
			// Written in two pieces, split inside a line.
			half := len(tc.stderr) / 2
			w.Write([]byte(tc.stderr[:half]))
			w.Write([]byte(tc.stderr[half:]))
			failure, _, after := w.seen()
			if stopped := context.Cause(ctx) == errGeminiRateLimited; stopped != tc.stopped || failure != tc.failure || after != tc.after {
				t.Errorf("stopped %v, failure %q, after %s; want %v, %q, %s", stopped, failure, after, tc.stopped, tc.failure, tc.after)
			}
		})
	}
}

// TestGeminiStreamOutcomes feeds recorded stream-json events (Gemini CLI
// 0.61.0) to the classification.
func TestGeminiStreamOutcomes(t *testing.T) {
	const (
		writeRefused = `{"type":"tool_use","tool_name":"write_file","tool_id":"w1","parameters":{"file_path":"x.txt","content":"x"}}
{"type":"tool_result","tool_id":"w1","status":"error","output":"Tool \"write_file\" not found.","error":{"type":"tool_not_registered","message":"Tool \"write_file\" not found."}}`
		stats = `"stats":{"total_tokens":60,"input_tokens":40,"output_tokens":20,"models":{}}`
	)
	for _, tc := range []struct {
		name, stream string
		kind         agent.Kind
		reason       string
	}{
		{"refused write, then no answer", writeRefused + `
{"type":"message","role":"assistant","content":"I could not write x.txt.","delta":true}
{"type":"result","status":"success",` + stats + `}`, agent.KindPermission, "write_file"},
		{"error result", `{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"Reached max session turns for this session."},` + stats + `}`,
			agent.KindAgent, "max session turns"},
		{"no result event", `{"type":"message","role":"assistant","content":"{\"success\": true}","delta":true}`, agent.KindMalformed, "without a result event"},
		{"answer before a tool call only", `{"type":"message","role":"assistant","content":"{\"success\": true","delta":true}
{"type":"message","role":"assistant","content":", \"summary\": \"split\"}","delta":true}
{"type":"result","status":"success",` + stats + `}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var acts []agent.Activity
			s := &geminiStream{activity: func(a agent.Activity) { acts = append(acts, a) }, tools: map[string]string{}}
			for _, l := range strings.Split(tc.stream, "\n") {
				s.line([]byte(l))
			}
			r, err := s.outcome(agent.Worker, ProcessResult{Result: proc.Result{State: successState(t)}}, &geminiRetries{}, nil)
			if tc.kind == "" {
				if err != nil || !r.Success || r.Summary != "split" || !r.Usage.Known || r.Usage.InputTokens != 40 {
					t.Errorf("%+v, %v", r, err)
				}
				return
			}
			ae := geminiKind(t, err, tc.kind)
			if !strings.Contains(ae.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", ae.Reason, tc.reason)
			}
			if strings.Contains(tc.stream, "result") && !ae.Usage.Known {
				t.Errorf("usage lost: %+v", ae.Usage)
			}
		})
	}
}

// successState is the state of a process that exited 0.
func successState(t *testing.T) *os.ProcessState {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.ProcessState
}
