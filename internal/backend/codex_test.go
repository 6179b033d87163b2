package backend

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/fakellm"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/prompt"
)

// These tests run the real Codex CLI (`make agent-clis`) against the fake
// model server, each with its own CODEX_HOME (also HOME), port, workdir and
// deadline. A missing CLI fails them.

// codexRig is one test's Codex agent, fake server and workdir.
type codexRig struct {
	codex   *Codex
	srv     *fakellm.Server
	workdir string

	mu       sync.Mutex
	activity []agent.Activity
	tree     proc.Tree
}

// newCodexRig starts a fake server answering script and a Codex agent
// pointed at it; timeout is the attempt's deadline.
func newCodexRig(t *testing.T, script string, timeout time.Duration) *codexRig {
	t.Helper()
	bin, err := fakellm.CLIPath("codex")
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
	env, err := fakellm.CodexHome(t.TempDir(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	a, err := factories["codex"](Spec{Agent: "codex", Bin: bin}, Env{Prompts: prompt.Renderer{}, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	c := a.(*Codex)
	c.Env = env
	return &codexRig{codex: c, srv: srv, workdir: t.TempDir()}
}

// run runs a task of role about description (which carries the script's
// match marker) with a 30 s context deadline.
func (r *codexRig) run(t *testing.T, role agent.Role, description string) (agent.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = agent.WithActivity(ctx, func(a agent.Activity) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.activity = append(r.activity, a)
	})
	ctx = agent.WithStart(ctx, func(tr proc.Tree) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.tree = tr
	})
	task := agent.Task{Role: role, Atom: agent.AtomRef{ID: "A1", Description: description},
		Objective: agent.Objective{Goal: "test the codex backend"}, Workdir: r.workdir, Attempt: 1}
	return r.codex.Run(ctx, task)
}

func (r *codexRig) tools() []agent.Activity {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []agent.Activity
	for _, a := range r.activity {
		if a.Tool != "" {
			out = append(out, a)
		}
	}
	return out
}

// patch is an apply_patch call through the shell, as Codex models send it.
func patch(path, line string) string {
	return "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: " + path + "\n+" + line + "\n*** End Patch\nEOF"
}

func execTurn(cmd string) string {
	b, _ := json.Marshal(cmd)
	return `[{"type": "tool_use", "name": "exec_command", "input": {"cmd": ` + string(b) + `}}]`
}

func textTurn(text string) string {
	b, _ := json.Marshal(text)
	return `[{"type": "text", "text": ` + string(b) + `}]`
}

func codexScript(marker string, turns ...string) string {
	return `{"conversations": [{"match": "` + marker + `", "require_tools": true, "turns": [` + strings.Join(turns, ",") + `]}]}`
}

func attemptError(t *testing.T, err error) *agent.AttemptError {
	t.Helper()
	var ae *agent.AttemptError
	if !errors.As(err, &ae) {
		t.Fatalf("want an *agent.AttemptError, got %v", err)
	}
	return ae
}

func TestCodexWorkerWritesThroughItsTools(t *testing.T) {
	r := newCodexRig(t, codexScript("CODEX-WORKER",
		execTurn("printf hello > hello.txt"),
		execTurn(patch("notes.md", "written by apply_patch")),
		textTurn(`Done. {"success": true, "summary": "wrote hello.txt and notes.md", "artifacts": ["hello.txt", "notes.md"]}`),
	), 25*time.Second)
	// The fake server answers a tool-call turn with a schema sample when the
	// request carries an output schema, so this script runs without one
	// (TestCodexOutputSchema covers it).
	r.codex.NoSchema = true

	res, err := r.run(t, agent.Worker, "write hello.txt CODEX-WORKER")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(r.workdir, "hello.txt")); err != nil || string(got) != "hello" {
		t.Errorf("hello.txt = %q, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(r.workdir, "notes.md")); err != nil || string(got) != "written by apply_patch\n" {
		t.Errorf("notes.md = %q, %v", got, err)
	}
	if !res.Success || res.Summary != "wrote hello.txt and notes.md" || !slices.Equal(res.Artifacts, []string{"hello.txt", "notes.md"}) {
		t.Errorf("result = %+v", res)
	}
	// Three model turns of 100 input and 20 output tokens each.
	if diff := cmp.Diff(agent.Usage{InputTokens: 300, OutputTokens: 60, Known: true}, res.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	want := []agent.Activity{{Tool: "Bash", Detail: "printf hello > hello.txt"}, {Tool: "Edit", Detail: "notes.md"}}
	if diff := cmp.Diff(want, r.tools()); diff != "" {
		t.Errorf("activity (-want +got):\n%s", diff)
	}
	if res.ToolCalls != 2 {
		t.Errorf("ToolCalls = %d, want 2", res.ToolCalls)
	}

	reqs := r.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3: %+v", len(reqs), reqs)
	}
	first := reqs[0]
	if first.Path != "/v1/responses" || !strings.Contains(first.FirstUser, "write hello.txt CODEX-WORKER") ||
		!strings.Contains(first.FirstUser, `"success"`) {
		t.Errorf("first request: path %s, user text %q", first.Path, first.FirstUser)
	}
	if !slices.Contains(first.Tools, "exec_command") {
		t.Errorf("tools offered: %v", first.Tools)
	}
	body := string(first.Body)
	for _, want := range []string{"`sandbox_mode` is `workspace-write`", "Approval policy is currently never", r.workdir} {
		if !strings.Contains(body, want) {
			t.Errorf("first request lacks %q", want)
		}
	}
}

func TestCodexProbeCannotWrite(t *testing.T) {
	r := newCodexRig(t, codexScript("CODEX-PROBE",
		execTurn("echo no > probe.txt"),
		execTurn(patch("patched.txt", "no")),
		textTurn(`{"feasible": true, "findings": "the workdir is read-only to me"}`),
	), 25*time.Second)
	r.codex.NoSchema = true // see TestCodexWorkerWritesThroughItsTools

	res, err := r.run(t, agent.Probe, "look around CODEX-PROBE")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, name := range []string{"probe.txt", "patched.txt"} {
		if _, err := os.Stat(filepath.Join(r.workdir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a read-only probe (stat: %v)", name, err)
		}
	}
	if !res.Feasible || res.Findings != "the workdir is read-only to me" {
		t.Errorf("result = %+v", res)
	}
	reqs := r.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Body), "`sandbox_mode` is `read-only`") {
		t.Errorf("the probe's first request does not say it is read-only")
	}
	// The shell ran inside the sandbox and the model saw the refusal.
	if !strings.Contains(reqs[1].Tail, "Read-only file system") {
		t.Errorf("tool output after the write: %q", reqs[1].Tail)
	}
}

func TestCodexRefusedEditIsPermissionDenied(t *testing.T) {
	// Outside the workdir and /tmp (which workspace-write also lets a
	// worker write).
	dir, err := os.MkdirTemp("/var/tmp", "aot-codex-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	outside := filepath.Join(dir, "outside.txt")
	r := newCodexRig(t, codexScript("CODEX-DENIED",
		execTurn(patch(outside, "no")),
		textTurn(`{"success": false, "summary": "could not write outside.txt", "artifacts": []}`),
	), 25*time.Second)
	r.codex.NoSchema = true // see TestCodexWorkerWritesThroughItsTools

	_, err = r.run(t, agent.Worker, "write outside.txt CODEX-DENIED")
	ae := attemptError(t, err)
	if ae.Kind != agent.KindPermission || !strings.Contains(ae.Reason, "apply_patch") {
		t.Errorf("kind %s, reason %q; want permission_denied naming apply_patch", ae.Kind, ae.Reason)
	}
	if !ae.Usage.Known || ae.Usage.InputTokens == 0 {
		t.Errorf("usage not kept on failure: %+v", ae.Usage)
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worker wrote outside its workdir (stat: %v)", err)
	}
	// The refusal showed as activity too (Codex says why, not which file).
	var refused []agent.Activity
	for _, a := range r.tools() {
		if a.Refused {
			refused = append(refused, a)
		}
	}
	if len(refused) != 1 || refused[0].Tool != "apply_patch" || !strings.Contains(refused[0].Why, "outside") {
		t.Errorf("refused activity = %+v", refused)
	}
}

func TestCodexMalformedAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
		schema           bool
	}{
		{"prose", "I looked at it and I think it is fine.", "I looked at it", false},
		{"wrong keys", `{"done": "yes"}`, `has no "success" key`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newCodexRig(t, codexScript("CODEX-MALFORMED", textTurn(tc.text)), 25*time.Second)
			r.codex.NoSchema = !tc.schema
			_, err := r.run(t, agent.Worker, "answer badly CODEX-MALFORMED")
			ae := attemptError(t, err)
			if ae.Kind != agent.KindMalformed || !strings.Contains(ae.Reason, tc.want) {
				t.Errorf("kind %s, reason %q; want malformed_answer containing %q", ae.Kind, ae.Reason, tc.want)
			}
			if !ae.Usage.Known {
				t.Errorf("usage not kept: %+v", ae.Usage)
			}
		})
	}
}

func TestCodexOutputSchema(t *testing.T) {
	r := newCodexRig(t, codexScript("CODEX-SCHEMA",
		`[{"type": "final", "json": {"passed": true, "evidence": "reads well", "scores": [{"criterion": "Readability", "score": 4, "rationale": null}]}}]`), 25*time.Second)
	res, err := r.run(t, agent.Judge, "readable code CODEX-SCHEMA")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.Passed || res.Evidence != "reads well" || len(res.Scores) != 1 || res.Scores[0].Score != 4 {
		t.Errorf("result = %+v", res)
	}
	var body struct {
		Text struct {
			Format struct {
				Type   string         `json:"type"`
				Strict bool           `json:"strict"`
				Schema map[string]any `json:"schema"`
			} `json:"format"`
		} `json:"text"`
	}
	if err := json.Unmarshal(r.srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	f := body.Text.Format
	str := map[string]any{"type": "string"}
	// OpenAI's strict mode: every object closed, every property required,
	// the optional ones nullable.
	score := map[string]any{"type": "object", "additionalProperties": false,
		"required": []any{"criterion", "rationale", "score"},
		"properties": map[string]any{"criterion": str, "score": map[string]any{"type": "number"},
			"rationale": map[string]any{"type": []any{"string", "null"}}}}
	want := map[string]any{"type": "object", "additionalProperties": false,
		"required": []any{"evidence", "passed", "scores"},
		"properties": map[string]any{
			"passed":   map[string]any{"type": "boolean"},
			"evidence": str,
			"scores":   map[string]any{"type": []any{"array", "null"}, "items": score},
		}}
	if f.Type != "json_schema" || !f.Strict {
		t.Errorf("format %s strict %v, want a strict json_schema", f.Type, f.Strict)
	}
	if diff := cmp.Diff(want, f.Schema); diff != "" {
		t.Errorf("schema sent (-want +got):\n%s", diff)
	}
}

func TestCodexRateLimited(t *testing.T) {
	for _, tc := range []struct{ name, turn string }{
		{"429", `{"type": "error", "status": 429, "retry_after": "3"}`},
		{"503", `{"type": "error", "status": 503}`},
		{"529", `{"type": "error", "status": 529}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// times 0: every request gets the error, a persistent limit.
			r := newCodexRig(t, codexScript("CODEX-RATE", tc.turn), 25*time.Second)
			start := time.Now()
			_, err := r.run(t, agent.Worker, "try CODEX-RATE")
			ae := attemptError(t, err)
			if ae.Kind != agent.KindRateLimit || !strings.Contains(ae.Reason, tc.name) {
				t.Errorf("kind %s, reason %q; want rate_limited naming %s", ae.Kind, ae.Reason, tc.name)
			}
			if _, ok := agent.Transient(err); !ok {
				t.Errorf("not transient: %v", err)
			}
			if d := time.Since(start); d > 25*time.Second {
				t.Errorf("took %s", d)
			}
			// request_max_retries 0: Codex itself does not retry.
			if n := len(r.srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestCodexUsageLimit(t *testing.T) {
	r := newCodexRig(t, codexScript("CODEX-QUOTA", `{"type": "error", "status": 429, "kind": "usage_limit"}`), 25*time.Second)
	res, err := r.run(t, agent.Worker, "try CODEX-QUOTA")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.UsageLimit {
		t.Fatalf("result = %+v, want UsageLimit", res)
	}
	// The fake plan resets in an hour; Codex prints it to the minute.
	at, err := time.Parse(time.RFC3339, res.RetryAt)
	if err != nil {
		t.Fatalf("RetryAt %q: %v", res.RetryAt, err)
	}
	if d := time.Until(at); d < 58*time.Minute || d > 61*time.Minute {
		t.Errorf("RetryAt %s is %s away, want about an hour", res.RetryAt, d)
	}
}

func TestCodexTimeoutKillsTheTree(t *testing.T) {
	// The model starts a long command, then never answers again.
	r := newCodexRig(t, codexScript("CODEX-HANG",
		execTurn("sleep 347"),
		`{"blocks": [{"type": "text", "text": "late"}], "delay_ms": 60000}`,
	), 10*time.Second) // long enough to start and call the tool on a loaded machine
	r.codex.NoSchema = true // see TestCodexWorkerWritesThroughItsTools
	start := time.Now()
	_, err := r.run(t, agent.Worker, "hang CODEX-HANG")
	ae := attemptError(t, err)
	if ae.Kind != agent.KindTimeout {
		t.Errorf("kind %s, reason %q; want timeout", ae.Kind, ae.Reason)
	}
	if d := time.Since(start); d > 25*time.Second {
		t.Errorf("took %s", d)
	}
	r.mu.Lock()
	tree := r.tree
	r.mu.Unlock()
	if tree.IsZero() {
		t.Fatal("the start callback never got the tree")
	}
	if proc.Alive(tree) {
		t.Errorf("processes of the attempt are still alive: %+v", tree)
	}
	if left := processesRunning("sleep 347"); len(left) > 0 {
		t.Errorf("the scripted command survived the attempt: pids %v", left)
	}
}

// processesRunning lists the pids whose command line is cmdline.
func processesRunning(cmdline string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == cmdline {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestCodexArgs(t *testing.T) {
	c := &Codex{Bin: "codex", Model: "gpt-5.5", Args: []string{"--ephemeral"}}
	for _, tc := range []struct {
		role    agent.Role
		sandbox string
	}{
		{agent.Worker, "workspace-write"},
		{agent.Probe, "read-only"},
		{agent.Verifier, "read-only"},
		{agent.Judge, "read-only"},
		{agent.Planner, "read-only"},
		{agent.Align, "read-only"},
	} {
		got := c.args(agent.Task{Role: tc.role, Workdir: "/w"}, "/tmp/s.json")
		want := []string{"exec", "--json", "--skip-git-repo-check", "--color", "never", "--sandbox", tc.sandbox,
			"-c", `approval_policy="never"`, "--cd", "/w", "--model", "gpt-5.5", "--output-schema", "/tmp/s.json", "--ephemeral", "-"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.role, diff)
		}
	}
}

func TestCodexFailureMessages(t *testing.T) {
	now := time.Date(2026, 11, 23, 11, 14, 0, 0, time.Local)
	for _, tc := range []struct {
		msg     string
		limit   bool
		retryAt string
		rate    bool
		after   time.Duration
	}{
		{msg: "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 12:14 PM.",
			limit: true, retryAt: time.Date(2026, 11, 23, 12, 14, 0, 0, time.Local).Format(time.RFC3339)},
		{msg: "You've hit your usage limit. Try again at 9:05 AM.",
			limit: true, retryAt: time.Date(2026, 11, 24, 9, 5, 0, 0, time.Local).Format(time.RFC3339)},
		{msg: "You’ve hit your usage limit. Upgrade to Pro or try again at Nov 25th, 2026 9:46 AM.",
			limit: true, retryAt: time.Date(2026, 11, 25, 9, 46, 0, 0, time.Local).Format(time.RFC3339)},
		{msg: "You've hit your usage limit. Try again later.", limit: true},
		{msg: "Quota exceeded. Check your plan and billing details.", limit: true},
		{msg: "exceeded retry limit, last status: 429 Too Many Requests", rate: true},
		{msg: "Rate limit reached for gpt-5. Please try again in 1.5s.", rate: true, after: 1500 * time.Millisecond},
		{msg: "unexpected status 503 Service Unavailable: The engine is currently overloaded, please try again later., url: http://x/v1/responses", rate: true},
		{msg: "We’re currently experiencing high demand, which may cause temporary errors.", rate: true},
		{msg: "unexpected status 401 Unauthorized: Incorrect API key provided., url: http://x/v1/responses"},
	} {
		limit, retryAt := codexUsageLimit(tc.msg, now)
		after, rate := codexRateLimited(tc.msg)
		if limit != tc.limit || retryAt != tc.retryAt || (!limit && (rate != tc.rate || after != tc.after)) {
			t.Errorf("%q: limit %v %q, rate %v %s; want %v %q, %v %s", tc.msg, limit, retryAt, rate, after, tc.limit, tc.retryAt, tc.rate, tc.after)
		}
	}
}
