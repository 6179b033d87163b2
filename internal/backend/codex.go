package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/prompt"
)

func newCodex(s Spec, env Env) (agent.Agent, error) {
	bin := s.Bin
	if bin == "" {
		bin = "codex"
	}
	return &Codex{Bin: bin, Model: s.Model, Args: s.Args, env: env}, nil
}

// Codex drives OpenAI's Codex CLI headless: `codex exec --json`, the
// prompt on stdin, the role kept to its permissions by Codex's own sandbox
// (read-only for every role but the worker, which may write in its
// workdir) with approvals never asked for, and the answer's shape enforced
// by --output-schema.
type Codex struct {
	Bin   string
	Model string
	Args  []string // appended to codex exec's own
	// Env is added to aot's environment for the CLI (tests point HOME and
	// CODEX_HOME at a fake server's config).
	Env []string
	// NoSchema leaves out --output-schema, for providers without strict
	// structured outputs; the answer is then found in the final message.
	NoSchema bool
	env      Env
}

// sandbox is the Codex sandbox of role: only the worker writes.
func codexSandbox(role agent.Role) string {
	if role == agent.Worker {
		return "workspace-write"
	}
	return "read-only"
}

// args is codex exec's command line for t; schema is the output schema's
// file, "" for none. The prompt comes on stdin ("-").
func (c *Codex) args(t agent.Task, schema string) []string {
	a := []string{"exec", "--json", "--skip-git-repo-check", "--color", "never",
		"--sandbox", codexSandbox(t.Role), "-c", `approval_policy="never"`}
	if t.Workdir != "" {
		a = append(a, "--cd", t.Workdir)
	}
	if c.Model != "" {
		a = append(a, "--model", c.Model)
	}
	if schema != "" {
		a = append(a, "--output-schema", schema)
	}
	a = append(a, c.Args...)
	return append(a, "-")
}

// Run runs t through codex exec and classifies how it ended.
func (c *Codex) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	text, err := c.env.Prompts.Render(t)
	if err != nil {
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindCrash, Reason: err.Error()}
	}
	schema, cleanup := "", func() {}
	if !c.NoSchema {
		if schema, cleanup, err = codexSchemaFile(t.Role); err != nil {
			return agent.Result{}, &agent.AttemptError{Kind: agent.KindCrash, Reason: err.Error()}
		}
	}
	defer cleanup()
	log, closeLog := openLog(c.env, t)
	logPrompt(log, text)
	defer closeLog()

	s := &codexStream{activity: agent.ActivityFunc(ctx), workdir: t.Workdir, started: map[string]bool{}}
	p := &Process{
		Bin: c.Bin, Args: c.args(t, schema), Env: c.Env, Dir: t.Workdir,
		Stdin: []byte(text), Timeout: c.env.Timeout, Log: log, OnLine: s.line,
		OwnSandbox: true,
	}
	pr := p.Run(ctx)
	return s.outcome(t.Role, pr)
}

// codexSchemaFile writes role's answer schema, made strict, to a temporary
// file for --output-schema; "" when the role has none.
func codexSchemaFile(role agent.Role) (path string, cleanup func(), err error) {
	raw := prompt.Schema(role)
	if raw == nil {
		return "", func() {}, nil
	}
	strict, err := codexStrictSchema(raw)
	if err != nil {
		return "", nil, fmt.Errorf("%s answer schema: %w", role, err)
	}
	f, err := os.CreateTemp("", "aot-codex-schema-*.json")
	if err != nil {
		return "", nil, fmt.Errorf("output schema: %w", err)
	}
	_, err = f.Write(strict)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", nil, fmt.Errorf("output schema: %w", err)
	}
	return f.Name(), func() { os.Remove(f.Name()) }, nil
}

// codexStrictSchema rewrites a schema into the form OpenAI's strict structured
// outputs accept, which is how Codex sends it: every object closed
// (additionalProperties false) and listing all its properties as required,
// those that were optional made nullable.
func codexStrictSchema(raw []byte) ([]byte, error) {
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	codexStrictify(s)
	return json.Marshal(s)
}

func codexStrictify(s map[string]any) {
	if items, ok := s["items"].(map[string]any); ok {
		codexStrictify(items)
	}
	props, ok := s["properties"].(map[string]any)
	if !ok {
		return
	}
	required := map[string]bool{}
	if r, ok := s["required"].([]any); ok {
		for _, k := range r {
			if k, ok := k.(string); ok {
				required[k] = true
			}
		}
	}
	keys := slices.Sorted(maps.Keys(props))
	all := make([]any, 0, len(keys))
	for _, k := range keys {
		all = append(all, k)
		p, ok := props[k].(map[string]any)
		if !ok {
			continue
		}
		codexStrictify(p)
		if typ, ok := p["type"].(string); ok && !required[k] {
			p["type"] = []any{typ, "null"}
		}
	}
	s["required"] = all
	s["additionalProperties"] = false
}

// codexStream reads codex exec's JSONL events as they arrive.
type codexStream struct {
	activity func(agent.Activity)
	workdir  string
	started  map[string]bool // items whose activity was reported

	final     string // the last agent message
	usage     agent.Usage
	failure   string // turn.failed's message, or the last fatal error event
	denials   []string
	refusals  []agent.Denial
	toolCalls int
}

// codexEvent is one line of codex exec --json.
type codexEvent struct {
	Type    string     `json:"type"`
	Item    *codexItem `json:"item"`
	Message string     `json:"message"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Usage *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

type codexItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Text    string `json:"text"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Command string `json:"command"`
	Output  string `json:"aggregated_output"`
	Changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Query  string `json:"query"`
	Prompt string `json:"prompt"`
}

func (s *codexStream) line(b []byte) {
	var e codexEvent
	if json.Unmarshal(b, &e) != nil {
		return
	}
	switch e.Type {
	case "item.started", "item.updated", "item.completed":
		if e.Item != nil {
			s.item(e.Item, e.Type == "item.completed")
		}
	case "turn.completed":
		if e.Usage != nil {
			s.usage.InputTokens += e.Usage.InputTokens
			s.usage.OutputTokens += e.Usage.OutputTokens
			s.usage.Known = true
		}
	case "turn.failed":
		if e.Error != nil && e.Error.Message != "" {
			s.failure = e.Error.Message
		}
	case "error":
		// "Reconnecting... 2/5 (...)" is Codex retrying on its own: shown
		// so a stalled model is told from a working agent, not fatal.
		if strings.HasPrefix(e.Message, "Reconnecting...") {
			s.activity(agent.Activity{Retry: true, Detail: "codex: " + oneLine(e.Message)})
		} else if e.Message != "" {
			s.failure = e.Message
		}
	}
}

// item reports a tool call once, when it starts (or completes unseen),
// and keeps the last agent message as the final answer.
func (s *codexStream) item(it *codexItem, completed bool) {
	if it.Type == "agent_message" {
		if completed {
			s.final = it.Text
		}
		return
	}
	if completed && it.Status == "declined" {
		s.denials = append(s.denials, fmt.Sprintf("%s declined", codexToolOf(it)))
		a, ok := s.describe(it)
		if !ok {
			a.Tool = it.Type
		}
		s.refusals = append(s.refusals, agent.Denial{Tool: a.Tool, Path: a.Detail, Why: "declined"})
		s.activity(agent.Activity{Tool: a.Tool, Detail: a.Detail, Refused: true, Why: "declined"})
	}
	if completed && it.Type == "command_execution" && it.Status == "failed" && codexSandboxDenied().MatchString(it.Output) {
		// The sandbox (workspace-write) kept the command from writing:
		// the shell says so, codex does not.
		cmd := oneLine(codexUnwrapShell(it.Command))
		why := oneLine(codexSandboxDenied().FindString(it.Output))
		s.denials = append(s.denials, "Bash "+cmd+": "+why)
		s.refusals = append(s.refusals, agent.Denial{Tool: "Bash", Path: cmd, Why: why})
		s.activity(agent.Activity{Tool: "Bash", Detail: cmd, Refused: true, Why: why})
	}
	if s.started[it.ID] {
		return
	}
	a, ok := s.describe(it)
	if !ok {
		return
	}
	s.started[it.ID] = true
	s.toolCalls++
	s.activity(a)
}

// describe is the activity line of a tool-call item; false for items that
// are not tool calls (reasoning, plans, warnings).
func (s *codexStream) describe(it *codexItem) (agent.Activity, bool) {
	switch it.Type {
	case "command_execution":
		return agent.Activity{Tool: "Bash", Detail: oneLine(codexUnwrapShell(it.Command))}, true
	case "file_change":
		paths := make([]string, 0, len(it.Changes))
		for _, c := range it.Changes {
			p := c.Path
			if rel, err := filepath.Rel(s.workdir, p); s.workdir != "" && err == nil && !strings.HasPrefix(rel, "..") {
				p = rel
			}
			paths = append(paths, p)
		}
		return agent.Activity{Tool: "Edit", Detail: oneLine(strings.Join(paths, ", "))}, true
	case "mcp_tool_call":
		return agent.Activity{Tool: it.Server + "." + it.Tool}, true
	case "web_search":
		return agent.Activity{Tool: "WebSearch", Detail: oneLine(it.Query)}, true
	case "collab_tool_call":
		return agent.Activity{Tool: it.Tool, Detail: oneLine(it.Prompt)}, true
	}
	return agent.Activity{}, false
}

func codexToolOf(it *codexItem) string {
	switch it.Type {
	case "command_execution":
		return "Bash " + oneLine(codexUnwrapShell(it.Command))
	case "file_change":
		return "apply_patch"
	}
	return it.Type
}

// codexUnwrapShell shows `/bin/bash -lc 'go test ./...'` as `go test ./...`.
func codexUnwrapShell(cmd string) string {
	for _, prefix := range []string{"/bin/bash -lc ", "bash -lc ", "/bin/sh -c ", "sh -c ", "/bin/zsh -lc "} {
		rest, ok := strings.CutPrefix(cmd, prefix)
		if !ok {
			continue
		}
		if len(rest) >= 2 && rest[0] == '\'' && rest[len(rest)-1] == '\'' {
			return strings.ReplaceAll(rest[1:len(rest)-1], `'\''`, `'`)
		}
		return rest
	}
	return cmd
}

// codexSandboxDenied is what a shell command says when Codex's sandbox
// kept it from writing.
var codexSandboxDenied = lazyRegexp(`[^\n]*(?:Read-only file system|Operation not permitted)[^\n]*`)

// codexPatchRejected is how Codex logs (on stderr) a file edit its sandbox or
// approval policy refused; such edits never reach the JSON stream.
var codexPatchRejected = lazyRegexp(`error=(patch rejected: [^;\n]+)`)

// outcome classifies the run: a limit or an error Codex reported, the
// process failing, or the final message as the role's answer.
func (s *codexStream) outcome(role agent.Role, pr ProcessResult) (agent.Result, error) {
	fail := func(kind agent.Kind, reason string) (agent.Result, error) {
		return agent.Result{}, &agent.AttemptError{Kind: kind, Reason: reason, Usage: s.usage}
	}
	f := pr.Failure()
	if f != nil && (f.Kind == agent.KindTimeout || f.Kind == agent.KindCancelled) {
		f.Usage = s.usage
		return agent.Result{}, f
	}
	if s.failure != "" {
		if limit, retryAt := codexUsageLimit(s.failure, time.Now()); limit {
			return agent.Result{UsageLimit: true, RetryAt: retryAt, Usage: s.usage}, nil
		}
		if after, ok := codexRateLimited(s.failure); ok {
			return agent.Result{}, &agent.AttemptError{Kind: agent.KindRateLimit, Usage: s.usage, RetryAfter: after,
				Reason: "codex: the model is rate limited or overloaded: " + oneLine(s.failure)}
		}
		return fail(agent.KindAgent, "codex: "+oneLine(s.failure))
	}
	if f != nil {
		f.Usage = s.usage
		return agent.Result{}, f
	}
	for _, m := range codexPatchRejected().FindAllStringSubmatch(string(pr.Stderr), -1) {
		why := strings.TrimPrefix(m[1], "patch rejected: ")
		s.denials = append(s.denials, "apply_patch: "+why)
		s.refusals = append(s.refusals, agent.Denial{Tool: "apply_patch", Why: oneLine(why)})
		s.activity(agent.Activity{Tool: "apply_patch", Refused: true, Why: oneLine(why)})
	}
	denied := func() (agent.Result, error) {
		return fail(agent.KindPermission, "codex refused "+strings.Join(s.denials, "; ")+" (sandbox "+codexSandbox(role)+")")
	}
	if strings.TrimSpace(s.final) == "" {
		if len(s.denials) > 0 {
			return denied()
		}
		return fail(agent.KindMalformed, "codex ended without a final message")
	}
	answer, ok := prompt.ExtractJSON(s.final)
	if !ok {
		return fail(agent.KindMalformed, agent.MalformedReason(role, agent.ErrNoJSON, s.final))
	}
	r, err := agent.Decode(role, answer)
	if err != nil {
		return fail(agent.KindMalformed, agent.MalformedReason(role, err, s.final))
	}
	if !r.UsageLimit && !r.OK(role) && len(s.denials) > 0 {
		return denied()
	}
	r.Usage = s.usage
	r.ToolCalls = s.toolCalls
	r.Denials = s.refusals
	return r, nil
}

// usageLimit reports whether msg is Codex's "You've hit your usage limit"
// (a ChatGPT plan's quota) or "Quota exceeded" (an API key's billing), and
// when it resets (RFC 3339) if the message says. Codex prints the reset in
// local time, "3:04 PM" when it is today, else "Jan 2nd, 2006 3:04 PM".
func codexUsageLimit(msg string, now time.Time) (bool, string) {
	low := strings.ToLower(msg)
	if strings.Contains(low, "quota exceeded") {
		return true, ""
	}
	if !strings.Contains(low, "hit your usage limit") {
		return false, ""
	}
	m := codexResetAt().FindStringSubmatch(msg)
	if m == nil {
		return true, ""
	}
	now = now.In(time.Local)
	if m[1] != "" {
		date := strings.Replace(m[1], m[2], "", 1) // "Nov 25th" -> "Nov 25"
		t, err := time.ParseInLocation("Jan 2, 2006 3:04 PM", date+" "+m[3], time.Local)
		if err != nil {
			return true, ""
		}
		return true, t.Format(time.RFC3339)
	}
	clock, err := time.ParseInLocation("3:04 PM", m[3], time.Local)
	if err != nil {
		return true, ""
	}
	t := time.Date(now.Year(), now.Month(), now.Day(), clock.Hour(), clock.Minute(), 0, 0, time.Local)
	if t.Before(now.Add(-time.Minute)) {
		t = t.AddDate(0, 0, 1)
	}
	return true, t.Format(time.RFC3339)
}

var codexResetAt = lazyRegexp(`(?i)try again at (?:([A-Z][a-z]{2} \d{1,2}(st|nd|rd|th), \d{4}) )?(\d{1,2}:\d{2} [AP]M)`)

// rateLimited reports whether msg is an HTTP 429, an overload (500 "high
// demand", 502, 503, 529) or a model at capacity, and how long the message
// asks to wait, when it says.
func codexRateLimited(msg string) (time.Duration, bool) {
	low := strings.ToLower(msg)
	hit := false
	for _, s := range []string{"429", "too many requests", "rate limit", "503", "529", "502 bad gateway",
		"overloaded", "high demand", "at capacity", "service unavailable"} {
		if strings.Contains(low, s) {
			hit = true
			break
		}
	}
	if !hit {
		return 0, false
	}
	if m := codexRetryIn().FindStringSubmatch(low); m != nil {
		if n, err := strconv.ParseFloat(m[1], 64); err == nil {
			unit := time.Second
			if m[2] == "ms" {
				unit = time.Millisecond
			} else if m[2] == "m" || strings.HasPrefix(m[2], "min") {
				unit = time.Minute
			}
			return time.Duration(n * float64(unit)), true
		}
	}
	return 0, true
}

var codexRetryIn = lazyRegexp(`try again in (\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?)\b`)
