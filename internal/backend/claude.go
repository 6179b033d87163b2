package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/prompt"
)

func newClaude(s Spec, env Env) (agent.Agent, error) {
	bin := s.Bin
	if bin == "" {
		bin = "claude"
	}
	return &Claude{Bin: bin, Model: s.Model, Args: s.Args, Prompts: env.Prompts, Timeout: env.Timeout, Log: env.Log, Getenv: env.Getenv}, nil
}

// Claude drives Claude Code headless: `claude -p` with the prompt on stdin,
// its stream-json events read as they come, the role kept to its tools by
// Claude Code's own permission options (never by the prompt alone).
type Claude struct {
	Bin     string
	Model   string
	Args    []string // appended to the command line
	Env     []string // added to aot's environment (tests: HOME, the fake server)
	Prompts prompt.Renderer
	Timeout time.Duration
	Log     func(agent.Task) (io.WriteCloser, error)
	// Getenv reads aot's environment (nil: none set).
	Getenv func(string) string
	// Now is the clock that turns "resets 3pm" into a time (nil: time.Now).
	Now func() time.Time
}

// claudeMaxRetries bounds Claude Code's own retries of a failed model call
// (it retries 429, 529 and 5xx with growing back-off for minutes by
// default): a few absorb a blip, more would make a persistent rate limit
// look like a hang. The engine backs off and retries the attempt itself.
// A CLAUDE_CODE_MAX_RETRIES in aot's environment wins.
const claudeMaxRetries = "3"

// Tool sets per role. Deny rules beat allow rules, also the user's own
// settings, and a denied tool is not even offered to the model (nor to its
// subagents). The worker's Write and Edit are left to acceptEdits, which
// confines them to the workdir: naming them in --allowedTools would let
// them write anywhere.
var (
	claudeReadOnlyTools = []string{"Read", "Grep", "Glob"}
	claudeWriteTools    = []string{"Write", "Edit", "NotebookEdit", "Bash"}
	claudeWorkerTools   = []string{"Bash", "Read", "Grep", "Glob"}
)

// args is the command line for role, the prompt going to stdin.
func (c *Claude) args(role agent.Role) []string {
	a := []string{"-p", "--output-format", "stream-json", "--verbose"}
	if c.Model != "" {
		a = append(a, "--model", c.Model)
	}
	if role == agent.Worker {
		// Edits in its workdir, any shell command.
		a = append(a, "--permission-mode", "acceptEdits", "--allowedTools", strings.Join(claudeWorkerTools, ","))
	} else {
		// Read-only: dontAsk refuses whatever is not allowed outright
		// instead of waiting for a person; the deny list removes the tools
		// that write or run commands. (2.1.330's "default" mode, which
		// lets shell commands run when Claude Code judges them read-only,
		// is not what a probe or a judge gets.)
		a = append(a, "--permission-mode", "dontAsk",
			"--allowedTools", strings.Join(claudeReadOnlyTools, ","),
			"--disallowedTools", strings.Join(claudeWriteTools, ","))
	}
	if s := prompt.Schema(role); s != nil {
		a = append(a, "--json-schema", string(s))
	}
	return append(a, c.Args...)
}

// Run runs t through Claude Code.
func (c *Claude) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	text, err := c.Prompts.Render(t)
	if err != nil {
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindCrash, Reason: fmt.Sprintf("render the %s prompt: %v", t.Role, err)}
	}
	var extra []string
	if c.Getenv == nil || c.Getenv("CLAUDE_CODE_MAX_RETRIES") == "" {
		extra = append(extra, "CLAUDE_CODE_MAX_RETRIES="+claudeMaxRetries)
	}
	extra = append(extra, c.Env...)
	log, closeLog := openLog(Env{Log: c.Log}, t)
	logPrompt(log, text)
	defer closeLog()
	st := &claudeStream{workdir: t.Workdir, activity: agent.ActivityFunc(ctx), usage: map[string]claudeUsage{}}
	p := &Process{Bin: c.Bin, Args: c.args(t.Role), Env: extra, Dir: t.Workdir, Stdin: []byte(text),
		Timeout: c.Timeout, Log: log, OnLine: st.line}
	res := p.Run(ctx)
	return c.outcome(t.Role, res, st)
}

// outcome classifies a finished run.
func (c *Claude) outcome(role agent.Role, res ProcessResult, st *claudeStream) (agent.Result, error) {
	usage := st.totalUsage()
	if f := res.Failure(); f != nil && (f.Kind == agent.KindTimeout || f.Kind == agent.KindCancelled || st.result == nil) {
		f.Usage = usage
		if f.Kind == agent.KindTimeout && st.retrying() {
			// Claude Code was still retrying a refused model call: the
			// provider, not the atom, ran out the clock.
			return agent.Result{}, &agent.AttemptError{Kind: agent.KindRateLimit, Usage: usage, RetryAfter: st.retryDelay(),
				Reason: fmt.Sprintf("rate limited: the model API answered HTTP %d %d time(s) and Claude Code was still retrying when the attempt %s", st.lastRetry.Status, st.retries, f.Reason)}
		}
		if f.Kind == agent.KindCrash {
			f.Reason += "; no result line from Claude Code"
		}
		return agent.Result{}, f
	}
	r := st.result
	if r == nil {
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindMalformed, Usage: usage,
			Reason: "malformed answer: Claude Code exited without a result line" + res.StderrHint()}
	}
	usage = r.Usage.usage(r.CostUSD)
	if r.IsError || strings.HasPrefix(r.Subtype, "error") {
		return c.errorResult(r, st, usage)
	}
	answer, found := []byte(r.Structured), len(r.Structured) > 0 && string(r.Structured) != "null"
	if !found {
		answer, found = prompt.ExtractJSON(r.Result)
	}
	var out agent.Result
	decodeErr := agent.ErrNoJSON
	if found {
		out, decodeErr = agent.Decode(role, answer)
	}
	denied := r.deniedTools()
	if len(denied) == 0 {
		for _, d := range st.denials {
			if !slices.Contains(denied, d.Tool) {
				denied = append(denied, d.Tool)
			}
		}
	}
	if decodeErr != nil {
		if len(denied) > 0 {
			return agent.Result{}, &agent.AttemptError{Kind: agent.KindPermission, Usage: usage,
				Reason: fmt.Sprintf("permission denied: Claude Code refused %s, and the %s gave no valid answer (%v)", strings.Join(denied, ", "), role, decodeErr)}
		}
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindMalformed, Usage: usage,
			Reason: agent.MalformedReason(role, decodeErr, r.Result)}
	}
	if len(denied) > 0 && !out.UsageLimit && !out.OK(role) {
		note := fmt.Sprintf(" (Claude Code refused: %s)", strings.Join(denied, ", "))
		switch role {
		case agent.Worker:
			out.Summary += note
		case agent.Probe:
			out.Findings += note
		default:
			out.Evidence += note
		}
	}
	out.Usage = usage
	out.ToolCalls = st.toolCalls
	out.Denials = st.denials
	return out, nil
}

// errorResult classifies a result line that reports an error.
func (c *Claude) errorResult(r *claudeResult, st *claudeStream, usage agent.Usage) (agent.Result, error) {
	text := strings.TrimSpace(r.Result)
	if text == "" {
		text = strings.Join(r.Errors, "; ")
	}
	if limit, at := c.usageLimit(text); limit {
		return agent.Result{UsageLimit: true, RetryAt: at, Usage: usage, Summary: text, ToolCalls: st.toolCalls}, nil
	}
	switch {
	case r.APIErrorStatus == 429 || r.APIErrorStatus == 503 || r.APIErrorStatus == 529 || claudeRateLimitText().MatchString(text):
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindRateLimit, Usage: usage, RetryAfter: st.retryDelay(),
			Reason: fmt.Sprintf("rate limited after %d retries by Claude Code: %s", st.retries, quoteText(text))}
	}
	what := r.Subtype
	if r.TerminalReason != "" {
		what = r.TerminalReason
	}
	return agent.Result{}, &agent.AttemptError{Kind: agent.KindAgent, Usage: usage,
		Reason: fmt.Sprintf("Claude Code reported an error (%s): %s", what, quoteText(text))}
}

var (
	claudeRateLimitText = lazyRegexp(`(?i)API Error:?\s*(?:Request rejected \()?(429|503|529)\b|overloaded_error|rate_limit_error`)
	// What Claude Code prints when a subscription's quota is used up, or
	// what the API says when an account's is: "Claude AI usage limit
	// reached|1767225600", "5-hour limit reached ∙ resets 3pm", "You've hit
	// your session limit · resets 3pm (Europe/Paris)", "credit balance is too
	// low", "would exceed your account's rate limit".
	claudeUsageLimitText = lazyRegexp(`(?i)usage limit reached|limit reached\s*[∙·•]\s*resets|you've hit your|you have hit your|out of usage|credit balance (?:is )?too low|spend limit|exceed your account's rate limit`)
	claudeEpochReset     = lazyRegexp(`(?i)limit reached\|(\d{9,11})`)
	claudeClockReset     = lazyRegexp(`(?i)resets\s+(?:at\s+)?(?:([A-Z][a-z]{2})\s+(\d{1,2}),?\s+(?:at\s+)?)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)(?:\s*\(([^)]+)\))?`)
)

// usageLimit reports whether text says a quota is used up, and when it
// resets (RFC 3339) if it says.
func (c *Claude) usageLimit(text string) (bool, string) {
	if !claudeUsageLimitText().MatchString(text) {
		return false, ""
	}
	if m := claudeEpochReset().FindStringSubmatch(text); m != nil {
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		return true, time.Unix(sec, 0).UTC().Format(time.RFC3339)
	}
	if m := claudeClockReset().FindStringSubmatch(text); m != nil {
		now := time.Now
		if c.Now != nil {
			now = c.Now
		}
		return true, claudeResetTime(now(), m)
	}
	return true, ""
}

// claudeResetTime turns a "resets [Mon D, ]H[:MM]am|pm[ (Zone)]" match into the
// next such time after now.
func claudeResetTime(now time.Time, m []string) string {
	loc := now.Location()
	if m[6] != "" {
		l, err := time.LoadLocation(m[6])
		if err != nil {
			return ""
		}
		loc = l
	}
	now = now.In(loc)
	hour, _ := strconv.Atoi(m[3])
	minute, _ := strconv.Atoi(m[4])
	if hour < 1 || hour > 12 || minute > 59 {
		return ""
	}
	hour %= 12
	if strings.EqualFold(m[5], "pm") {
		hour += 12
	}
	if m[1] != "" {
		mon, err := time.Parse("Jan", m[1])
		day, _ := strconv.Atoi(m[2])
		if err != nil || day < 1 || day > 31 {
			return ""
		}
		at := time.Date(now.Year(), mon.Month(), day, hour, minute, 0, 0, loc)
		if at.Before(now.AddDate(0, 0, -1)) {
			at = at.AddDate(1, 0, 0)
		}
		return at.Format(time.RFC3339)
	}
	at := time.Date(now.Year(), now.Month(), now.Day(), hour, minute, 0, 0, loc)
	if !at.After(now) {
		at = at.AddDate(0, 0, 1)
	}
	return at.Format(time.RFC3339)
}

// claudeStream follows Claude Code's stream-json events.
type claudeStream struct {
	workdir   string
	activity  func(agent.Activity)
	toolCalls int
	// usage is each model message's last reported usage, by message id:
	// the fallback when no result line comes.
	usage  map[string]claudeUsage
	result *claudeResult
	// retries counts api_retry events since the model last answered;
	// lastRetry is the latest.
	retries   int
	lastRetry claudeRetry
	// calls are the tool calls by id, to name a refused one; denials are
	// the refusals seen, in order.
	calls   map[string]agent.Activity
	denials []agent.Denial
	refused map[string]bool // tool_use ids already reported
}

type claudeEvent struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Message struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Content []struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			IsError   bool            `json:"is_error"`
			Content   json.RawMessage `json:"content"`
		} `json:"content"`
		Usage *claudeUsage `json:"usage"`
	} `json:"message"`
	claudeRetry
	// Meta says, on a user line, which tool results were refused by
	// Claude Code's permission rules rather than run.
	Meta []struct {
		ID       string `json:"id"`
		Decision struct {
			Decision string `json:"decision"`
		} `json:"permission_decision"`
	} `json:"tool_result_meta"`
}

// claudeRefusal is how Claude Code words a tool call its permission rules
// refused ("Claude requested permissions to write to X, but you haven't
// granted it yet", "... to edit X which is a sensitive file").
var claudeRefusal = lazyRegexp(`^(?:Error: )?Claude requested permissions? to `)

// claudeRetry is a system/api_retry event: Claude Code will call the model
// again after RetryDelayMS.
type claudeRetry struct {
	Status       int     `json:"error_status"`
	RetryDelayMS float64 `json:"retry_delay_ms"`
	Error        string  `json:"error"`
}

// describe says a retry for people: "the model call failed (HTTP 429
// rate_limit); Claude Code calls it again in 6s (retry 2)".
func (r claudeRetry) describe(n int) string {
	what := "the model call failed"
	switch {
	case r.Status > 0 && r.Error != "":
		what += fmt.Sprintf(" (HTTP %d %s)", r.Status, r.Error)
	case r.Status > 0:
		what += fmt.Sprintf(" (HTTP %d)", r.Status)
	case r.Error != "":
		what += " (" + r.Error + ")"
	}
	d := time.Duration(r.RetryDelayMS * float64(time.Millisecond)).Round(100 * time.Millisecond)
	return fmt.Sprintf("%s; Claude Code calls it again in %s (retry %d)", what, d, n)
}

type claudeUsage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadTokens     int64 `json:"cache_read_input_tokens"`
}

func (u claudeUsage) usage(cost float64) agent.Usage {
	return agent.Usage{InputTokens: u.InputTokens + u.CacheCreationTokens + u.CacheReadTokens, OutputTokens: u.OutputTokens, CostUSD: cost, Known: true}
}

// claudeResult is the final result line.
type claudeResult struct {
	Subtype        string          `json:"subtype"`
	IsError        bool            `json:"is_error"`
	Result         string          `json:"result"`
	Errors         []string        `json:"errors"`
	Structured     json.RawMessage `json:"structured_output"`
	CostUSD        float64         `json:"total_cost_usd"`
	Usage          claudeUsage     `json:"usage"`
	TerminalReason string          `json:"terminal_reason"`
	APIErrorStatus int             `json:"api_error_status"`
	Denials        []struct {
		ToolName  string          `json:"tool_name"`
		ToolUseID string          `json:"tool_use_id"`
		Input     json.RawMessage `json:"tool_input"`
	} `json:"permission_denials"`
}

// deniedTools names the refused tools, once each, in order.
func (r *claudeResult) deniedTools() []string {
	var names []string
	for _, d := range r.Denials {
		if !slices.Contains(names, d.ToolName) {
			names = append(names, d.ToolName)
		}
	}
	return names
}

// line reads one stdout line; what is not an event is left to the log.
func (s *claudeStream) line(b []byte) {
	var e claudeEvent
	if json.Unmarshal(b, &e) != nil {
		return
	}
	switch e.Type {
	case "system":
		if e.Subtype == "api_retry" {
			s.retries++
			s.lastRetry = e.claudeRetry
			s.activity(agent.Activity{Retry: true, Detail: s.lastRetry.describe(s.retries)})
		}
	case "assistant":
		if e.Message.Model == "<synthetic>" {
			return // Claude Code's own message (an API error), not the model's
		}
		s.retries, s.lastRetry = 0, claudeRetry{}
		if e.Message.Usage != nil && e.Message.ID != "" {
			s.usage[e.Message.ID] = *e.Message.Usage
		}
		for _, c := range e.Message.Content {
			if c.Type != "tool_use" || c.Name == "StructuredOutput" {
				continue
			}
			s.toolCalls++
			a := agent.Activity{Tool: c.Name, Detail: s.detail(c.Name, c.Input)}
			if s.calls == nil {
				s.calls = map[string]agent.Activity{}
			}
			s.calls[c.ID] = a
			s.activity(a)
		}
	case "user":
		rejected := map[string]bool{}
		for _, m := range e.Meta {
			if m.Decision.Decision == "reject" || m.Decision.Decision == "deny" {
				rejected[m.ID] = true
			}
		}
		for _, c := range e.Message.Content {
			if c.Type != "tool_result" || !c.IsError {
				continue
			}
			text := claudeText(c.Content)
			if rejected[c.ToolUseID] || claudeRefusal().MatchString(text) {
				call := s.calls[c.ToolUseID]
				s.refuse(c.ToolUseID, call.Tool, call.Detail, text)
			}
		}
	case "result":
		var r claudeResult
		if json.Unmarshal(b, &r) == nil {
			s.result = &r
			// A refusal the stream did not show as one is still a refusal.
			for _, d := range r.Denials {
				s.refuse(d.ToolUseID, d.ToolName, s.detail(d.ToolName, d.Input), "")
			}
		}
	}
}

// refuse records a refused tool call once and shows it as it happens.
func (s *claudeStream) refuse(id, tool, detail, why string) {
	if s.refused == nil {
		s.refused = map[string]bool{}
	}
	if id != "" && s.refused[id] {
		return
	}
	s.refused[id] = true
	if tool == "" {
		tool = "a tool"
	}
	d := agent.Denial{Tool: tool, Path: detail, Why: oneLine(strings.TrimPrefix(why, "Error: "))}
	s.denials = append(s.denials, d)
	s.activity(agent.Activity{Tool: tool, Detail: detail, Refused: true, Why: d.Why})
}

// claudeText is a tool result's content as text: a string, or the text
// blocks of a list.
func claudeText(raw json.RawMessage) string {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, " ")
}

// retrying reports whether the last thing Claude Code did was wait to call
// a model that refused with a rate limit or an overload.
func (s *claudeStream) retrying() bool {
	switch s.lastRetry.Status {
	case 429, 503, 529:
		return s.retries > 0
	}
	return s.lastRetry.Error == "rate_limit" || s.lastRetry.Error == "overloaded"
}

func (s *claudeStream) retryDelay() time.Duration {
	return time.Duration(s.lastRetry.RetryDelayMS * float64(time.Millisecond))
}

func (s *claudeStream) totalUsage() agent.Usage {
	var u agent.Usage
	for _, m := range s.usage {
		mu := m.usage(0)
		u.InputTokens += mu.InputTokens
		u.OutputTokens += mu.OutputTokens
		u.Known = true
	}
	return u
}

// detail is a tool call in one line: the command, the file, the pattern.
func (s *claudeStream) detail(tool string, input json.RawMessage) string {
	var in map[string]any
	json.Unmarshal(input, &in)
	str := func(k string) string { v, _ := in[k].(string); return v }
	var d string
	switch {
	case str("command") != "":
		d = str("command")
	case str("file_path") != "" || str("notebook_path") != "":
		d = str("file_path") + str("notebook_path")
		if rel, err := filepath.Rel(s.workdir, d); err == nil && s.workdir != "" && !strings.HasPrefix(rel, "..") {
			d = rel
		}
	case str("pattern") != "":
		d = str("pattern")
		if p := str("path"); p != "" {
			d += " in " + p
		}
	case str("description") != "":
		d = str("description")
	case str("url") != "":
		d = str("url")
	default:
		d = string(input)
	}
	return brief.Line(d, 160)
}
