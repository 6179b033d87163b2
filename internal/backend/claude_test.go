package backend

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/fakellm"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/prompt"
)

// claudeHarness runs the real Claude Code against a fake model server,
// with its own HOME, port, workdir and deadline.
type claudeHarness struct {
	t      *testing.T
	srv    *fakellm.Server
	agent  *Claude
	work   string
	mu     sync.Mutex
	log    bytes.Buffer
	events []agent.Activity
	tree   proc.Tree
}

// newClaudeHarness serves script, in which {{WORK}} stands for the workdir.
func newClaudeHarness(t *testing.T, script string) *claudeHarness {
	t.Helper()
	bin, err := fakellm.CLIPath("claude")
	if err != nil {
		t.Fatal(err)
	}
	h := &claudeHarness{t: t, work: t.TempDir()}
	s, err := fakellm.ParseScript([]byte(strings.ReplaceAll(script, "{{WORK}}", h.work)))
	if err != nil {
		t.Fatal(err)
	}
	if h.srv, err = fakellm.New(s, fakellm.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.srv.Close() })
	h.agent = &Claude{Bin: bin, Model: "claude-fake-1", Env: fakellm.ClaudeEnv(t.TempDir(), h.srv.URL()), Timeout: 20 * time.Second,
		Log: func(agent.Task) (io.WriteCloser, error) { return claudeLog{h}, nil }}
	return h
}

type claudeLog struct{ h *claudeHarness }

func (l claudeLog) Write(p []byte) (int, error) {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	return l.h.log.Write(p)
}
func (claudeLog) Close() error { return nil }

// run gives the agent a task for role about an atom described by desc.
func (h *claudeHarness) run(role agent.Role, desc string) (agent.Result, error, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = agent.WithActivity(ctx, func(a agent.Activity) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, a)
	})
	ctx = agent.WithStart(ctx, func(tr proc.Tree) { h.tree = tr })
	start := time.Now()
	r, err := h.agent.Run(ctx, agent.Task{Role: role, Atom: agent.AtomRef{ID: "A1", Description: desc},
		Objective: agent.Objective{Goal: "a tested claude backend"}, Workdir: h.work, Attempt: 1})
	return r, err, time.Since(start)
}

func (h *claudeHarness) mainRequests() []fakellm.Request {
	var out []fakellm.Request
	for _, r := range h.srv.Requests() {
		if r.Path == "/v1/messages" && r.Conversation == 0 {
			out = append(out, r)
		}
	}
	return out
}

func claudeKind(t *testing.T, err error, want agent.Kind) *agent.AttemptError {
	t.Helper()
	var ae *agent.AttemptError
	if !errors.As(err, &ae) || ae.Kind != want {
		t.Fatalf("error %v (%T), want kind %s", err, err, want)
	}
	return ae
}

func TestClaudeWorkerWritesAFileThroughItsToolsAndAnswers(t *testing.T) {
	h := newClaudeHarness(t, `{"conversations": [{"match": "CLAUDE-WORKER", "require_tools": true, "turns": [
		[{"type": "text", "text": "Writing it."}, {"type": "tool_use", "name": "Write", "input": {"file_path": "{{WORK}}/hello.txt", "content": "hello\n"}}],
		[{"type": "tool_use", "name": "Bash", "input": {"command": "echo world >> hello.txt", "description": "append"}}],
		[{"type": "final", "json": {"success": true, "summary": "wrote hello.txt", "artifacts": ["hello.txt"]}}]]}]}`)
	r, err, _ := h.run(agent.Worker, "CLAUDE-WORKER: write hello.txt")
	if err != nil {
		t.Fatalf("Run: %v\nlog:\n%s", err, h.log.String())
	}
	got, _ := os.ReadFile(filepath.Join(h.work, "hello.txt"))
	if string(got) != "hello\nworld\n" {
		t.Errorf("hello.txt = %q", got)
	}
	if !r.Success || r.Summary != "wrote hello.txt" || !slices.Equal(r.Artifacts, []string{"hello.txt"}) {
		t.Errorf("result %+v", r)
	}
	// Three model calls at the fake's 100 input and 20 output tokens each.
	if !r.Usage.Known || r.Usage.InputTokens != 300 || r.Usage.OutputTokens != 60 || r.Usage.CostUSD <= 0 {
		t.Errorf("usage %+v", r.Usage)
	}
	want := []agent.Activity{{Tool: "Write", Detail: "hello.txt"}, {Tool: "Bash", Detail: "echo world >> hello.txt"}}
	if !slices.Equal(h.events, want) || r.ToolCalls != 2 {
		t.Errorf("activity %v (%d tool calls), want %v", h.events, r.ToolCalls, want)
	}
	reqs := h.mainRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3: %+v", len(reqs), reqs)
	}
	if !strings.Contains(reqs[0].Tail, "CLAUDE-WORKER: write hello.txt") || !strings.Contains(reqs[0].Tail, `"success"`) {
		t.Errorf("the prompt did not reach the model: %q", reqs[0].Tail)
	}
	for _, tool := range []string{"Write", "Edit", "Bash", "Read", "StructuredOutput"} {
		if !slices.Contains(reqs[0].Tools, tool) {
			t.Errorf("worker not offered %s: %v", tool, reqs[0].Tools)
		}
	}
	if reqs[0].Model != "claude-fake-1" {
		t.Errorf("model %q", reqs[0].Model)
	}
	if !strings.Contains(h.log.String(), `"type":"result"`) {
		t.Errorf("the attempt log lacks the result line:\n%s", h.log.String())
	}
}

func TestClaudeProbeIsRefusedWritesAndShell(t *testing.T) {
	h := newClaudeHarness(t, `{"conversations": [{"match": "CLAUDE-PROBE", "require_tools": true, "turns": [
		[{"type": "tool_use", "name": "Write", "input": {"file_path": "{{WORK}}/x.txt", "content": "no"}}],
		[{"type": "tool_use", "name": "Bash", "input": {"command": "echo no > y.txt"}}],
		[{"type": "tool_use", "name": "Read", "input": {"file_path": "{{WORK}}/README"}}],
		[{"type": "final", "json": {"feasible": true, "findings": "the README says how"}}]]}]}`)
	os.WriteFile(filepath.Join(h.work, "README"), []byte("how\n"), 0o644)
	r, err, _ := h.run(agent.Probe, "CLAUDE-PROBE: look around")
	if err != nil {
		t.Fatalf("Run: %v\nlog:\n%s", err, h.log.String())
	}
	for _, f := range []string{"x.txt", "y.txt"} {
		if _, err := os.Stat(filepath.Join(h.work, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the probe wrote %s (%v)", f, err)
		}
	}
	if !r.Feasible || r.Findings != "the README says how" {
		t.Errorf("result %+v", r)
	}
	reqs := h.mainRequests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	for _, tool := range []string{"Write", "Edit", "Bash", "NotebookEdit"} {
		if slices.Contains(reqs[0].Tools, tool) {
			t.Errorf("probe offered %s: %v", tool, reqs[0].Tools)
		}
	}
	if !slices.Contains(reqs[0].Tools, "Read") {
		t.Errorf("probe not offered Read: %v", reqs[0].Tools)
	}
	if !strings.Contains(reqs[1].Tail, "Write") || !strings.Contains(reqs[3].Tail, "how") {
		t.Errorf("tool results: %q / %q", reqs[1].Tail, reqs[3].Tail)
	}
}

func TestClaudeWorkerDeniedOutsideItsWorkdirIsAPermissionFailure(t *testing.T) {
	outside := t.TempDir()
	h := newClaudeHarness(t, strings.ReplaceAll(`{"conversations": [{"match": "CLAUDE-DENIED", "require_tools": true, "turns": [
		[{"type": "tool_use", "name": "Write", "input": {"file_path": "OUT/z.txt", "content": "no"}}],
		[{"type": "text", "text": "I was not allowed to write."}],
		[{"type": "text", "text": "Still not allowed."}]]}]}`, "OUT", outside))
	_, err, _ := h.run(agent.Worker, "CLAUDE-DENIED: fetch")
	if _, err := os.Stat(filepath.Join(outside, "z.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worker wrote outside its workdir (%v)", err)
	}
	ae := claudeKind(t, err, agent.KindPermission)
	if !strings.Contains(ae.Reason, "Write") || !ae.Usage.Known {
		t.Errorf("reason %q, usage %+v", ae.Reason, ae.Usage)
	}
}

// A refused write is reported as it happens, naming the tool and the
// file, and stays on the result whatever the model then claims.
func TestClaudeRefusalsAreReportedWhateverTheModelClaims(t *testing.T) {
	outside := t.TempDir()
	h := newClaudeHarness(t, strings.ReplaceAll(`{"conversations": [{"match": "CLAUDE-CLAIMS", "require_tools": true, "turns": [
		[{"type": "tool_use", "name": "Write", "input": {"file_path": "OUT/z.txt", "content": "no"}}],
		[{"type": "tool_use", "name": "Bash", "input": {"command": "echo fine > ok.txt"}}],
		[{"type": "final", "json": {"success": true, "summary": "wrote z.txt", "artifacts": ["z.txt"]}}]]}]}`, "OUT", outside))
	r, err, _ := h.run(agent.Worker, "CLAUDE-CLAIMS: write z.txt")
	if err != nil || !r.Success {
		t.Fatalf("Run: %+v, %v", r, err)
	}
	want := agent.Denial{Tool: "Write", Path: filepath.Join(outside, "z.txt")}
	if len(r.Denials) != 1 || r.Denials[0].Tool != want.Tool || r.Denials[0].Path != want.Path || !strings.Contains(r.Denials[0].Why, "permission") {
		t.Fatalf("denials = %+v, want one like %+v", r.Denials, want)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var refused []agent.Activity
	for _, a := range h.events {
		if a.Refused {
			refused = append(refused, a)
		}
	}
	if len(refused) != 1 || refused[0].Tool != "Write" || refused[0].Detail != want.Path {
		t.Fatalf("refused activity = %+v (all: %+v)", refused, h.events)
	}
}

func TestClaudeMalformedAnswer(t *testing.T) {
	h := newClaudeHarness(t, `{"conversations": [{"match": "CLAUDE-MALFORMED", "require_tools": true, "turns": [
		[{"type": "text", "text": "All done, trust me."}],
		[{"type": "text", "text": "Really, all done."}]]}]}`)
	_, err, _ := h.run(agent.Worker, "CLAUDE-MALFORMED")
	ae := claudeKind(t, err, agent.KindMalformed)
	if !strings.Contains(ae.Reason, "done") || !ae.Usage.Known || ae.Usage.InputTokens == 0 {
		t.Errorf("reason %q, usage %+v", ae.Reason, ae.Usage)
	}
}

// Left alone, Claude Code retries a 429 ten times with back-off doubling
// from about 0.6 s (over four minutes); the backend caps it at three.
func TestClaudeRateLimitEndsClassifiedWithinTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name, turn string
		timeout    time.Duration
		calls      int
	}{
		{"persistent 429", `{"type": "error", "status": 429}`, 20 * time.Second, 4},
		{"persistent 529", `{"type": "error", "status": 529}`, 20 * time.Second, 4},
		// Claude Code waits the 30 s asked for: the deadline ends it.
		{"429 retry after 30s", `{"type": "error", "status": 429, "retry_after": "30"}`, 3 * time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newClaudeHarness(t, `{"conversations": [{"match": "CLAUDE-LIMITED", "turns": [`+tc.turn+`]}]}`)
			h.agent.Timeout = tc.timeout
			_, err, took := h.run(agent.Worker, "CLAUDE-LIMITED")
			ae := claudeKind(t, err, agent.KindRateLimit)
			if took > 15*time.Second {
				t.Errorf("took %s", took)
			}
			if n := len(h.mainRequests()); n != tc.calls {
				t.Errorf("%d model calls, want %d", n, tc.calls)
			}
			if ae.RetryAfter <= 0 {
				t.Errorf("no retry-after: %+v", ae)
			}
			t.Logf("%s after %s: %s (retry after %s)", ae.Kind, took.Round(time.Millisecond), ae.Reason, ae.RetryAfter)
		})
	}
}

func TestClaudeUsageLimitPausesTheLoop(t *testing.T) {
	for _, tc := range []struct{ name, turn, retryAt string }{
		{"account quota", `{"type": "error", "kind": "usage_limit"}`, ""},
		{"session limit with reset", `{"type": "error", "kind": "usage_limit", "message": "You've hit your session limit · resets 3pm (UTC)"}`, "T15:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newClaudeHarness(t, `{"conversations": [{"match": "CLAUDE-QUOTA", "turns": [`+tc.turn+`]}]}`)
			r, err, _ := h.run(agent.Worker, "CLAUDE-QUOTA")
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !r.UsageLimit || !strings.HasSuffix(r.RetryAt, tc.retryAt) || (tc.retryAt == "") != (r.RetryAt == "") {
				t.Errorf("result %+v", r)
			}
			if len(h.mainRequests()) != 1 {
				t.Errorf("Claude Code retried a used-up quota: %d calls", len(h.mainRequests()))
			}
		})
	}
}

func TestClaudeTimeoutKillsTheProcessTree(t *testing.T) {
	h := newClaudeHarness(t, `{"conversations": [{"match": "CLAUDE-SLOW", "require_tools": true, "turns": [
		[{"type": "tool_use", "name": "Bash", "input": {"command": "(sleep 611 &) ; sleep 612"}}]]}]}`)
	// Long enough for the CLI to start and call its tool on a loaded machine.
	h.agent.Timeout = 10 * time.Second
	_, err, took := h.run(agent.Worker, "CLAUDE-SLOW")
	ae := claudeKind(t, err, agent.KindTimeout)
	if took > 25*time.Second {
		t.Errorf("took %s", took)
	}
	if h.tree.IsZero() {
		t.Fatal("the process tree was not reported")
	}
	if proc.Alive(h.tree) {
		t.Errorf("processes of the attempt survive: %+v", h.tree)
	}
	if !ae.Usage.Known || ae.Usage.InputTokens != 100 {
		t.Errorf("usage %+v", ae.Usage)
	}
	if len(h.events) != 1 || h.events[0].Tool != "Bash" {
		t.Errorf("activity %v", h.events)
	}
}

func TestClaudeCommandLinePerRole(t *testing.T) {
	c := &Claude{Model: "m", Args: []string{"--effort", "low"}}
	for _, role := range agent.Roles {
		a := strings.Join(c.args(role), " ")
		mode, allowed := "--permission-mode dontAsk", "--allowedTools Read,Grep,Glob --disallowedTools Write,Edit,NotebookEdit,Bash"
		if role == agent.Worker {
			mode, allowed = "--permission-mode acceptEdits", "--allowedTools Bash,Read,Grep,Glob"
		}
		for _, want := range []string{"-p --output-format stream-json --verbose --model m", mode, allowed} {
			if !strings.Contains(a, want) {
				t.Errorf("%s: %q lacks %q", role, a, want)
			}
		}
		if strings.Contains(a, "dangerously") || strings.Contains(a, "bypassPermissions") {
			t.Errorf("%s: %q", role, a)
		}
		if s := prompt.Schema(role); (s != nil) != strings.Contains(a, "--json-schema") {
			t.Errorf("%s: schema %q", role, a)
		}
		if !strings.HasSuffix(a, "--effort low") {
			t.Errorf("%s: extra args not last: %q", role, a)
		}
	}
}

func TestClaudeUsageLimitTexts(t *testing.T) {
	now := time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC)
	c := &Claude{Now: func() time.Time { return now }}
	for _, tc := range []struct {
		text  string
		limit bool
		at    string
	}{
		{"Claude AI usage limit reached|1767225600", true, "2026-01-01T00:00:00Z"},
		{"5-hour limit reached ∙ resets 3pm", true, "2026-03-10T15:00:00Z"},
		{"You've hit your session limit · resets 9:30am (UTC)", true, "2026-03-11T09:30:00Z"},
		{"You've hit your weekly limit · resets Mar 14, 8am (Europe/Paris)", true, "2026-03-14T08:00:00+01:00"},
		{"API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.", true, ""},
		{"API Error: Request rejected (429) · Number of requests has exceeded your rate limit.", false, ""},
		{"API Error: 529 Overloaded.", false, ""},
	} {
		limit, at := c.usageLimit(tc.text)
		if limit != tc.limit || at != tc.at {
			t.Errorf("%q: %v %q, want %v %q", tc.text, limit, at, tc.limit, tc.at)
		}
	}
}
