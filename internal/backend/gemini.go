package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/prompt"
)

func newGemini(s Spec, env Env) (agent.Agent, error) {
	bin := s.Bin
	if bin == "" {
		bin = "gemini"
	}
	return &Gemini{Bin: bin, Model: s.Model, Args: s.Args, Prompts: env.Prompts, Timeout: env.Timeout, Log: env.Log}, nil
}

// Gemini runs Gemini CLI headless: the prompt on stdin (`-p ""` appends
// nothing to it), `--output-format stream-json`, and the role's approval
// mode. Read-only roles run in the "default" mode, in which a headless
// Gemini CLI does not even offer its write and shell tools (a call of one
// comes back "not found"); the worker runs in "yolo", which approves its
// edits and shell commands. Gemini CLI refuses to run headless in a folder
// it does not trust (exit 55), and downgrades yolo there, so every run
// trusts its workdir for that session only (--skip-trust, nothing is
// recorded in the user's trusted folders).
type Gemini struct {
	Bin     string
	Model   string
	Args    []string // appended to the command line
	Env     []string // added to aot's environment (tests: HOME, the fake server)
	Prompts prompt.Renderer
	Timeout time.Duration
	Log     func(agent.Task) (io.WriteCloser, error)
	// RateLimitRetries is how many of its own retries of an HTTP 429 or 5xx
	// Gemini CLI may start before the attempt ends as rate limited. Left to
	// itself it retries ten times over about three minutes, silently; the
	// engine's backoff knows better. 0 means 2.
	RateLimitRetries int
}

// geminiReadOnly is the approval mode of every role but the worker. The
// "plan" mode is not used: it offers write_file for plans under ~/.gemini.
const geminiReadOnly = "default"

// args is the command line of a run for role, without the binary.
func (g *Gemini) args(role agent.Role) []string {
	mode := geminiReadOnly
	if role == agent.Worker {
		mode = "yolo"
	}
	args := []string{"-p", "", "--output-format", "stream-json", "--approval-mode", mode, "--skip-trust"}
	if g.Model != "" {
		args = append(args, "--model", g.Model)
	}
	return append(args, g.Args...)
}

// Run runs t through Gemini CLI in t.Workdir.
func (g *Gemini) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	text, err := g.Prompts.Render(t)
	if err != nil {
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindCrash, Reason: fmt.Sprintf("render the %s prompt: %v", t.Role, err)}
	}
	log, closeLog := openLog(Env{Log: g.Log}, t)
	logPrompt(log, text)
	defer closeLog()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	retries := g.RateLimitRetries
	if retries <= 0 {
		retries = 2
	}
	st := &geminiStream{activity: agent.ActivityFunc(ctx), tools: map[string]string{}}
	watch := &geminiRetries{limit: retries, stop: cancel, notify: st.activity}
	p := Process{
		Bin: g.Bin, Args: g.args(t.Role), Env: g.Env, Dir: t.Workdir,
		Stdin: []byte(text), Timeout: g.Timeout,
		Log: io.MultiWriter(log, watch), OnLine: st.line,
	}
	res := p.Run(runCtx)
	return st.outcome(t.Role, res, watch, context.Cause(runCtx))
}

// geminiStream follows the stream-json events of one run.
type geminiStream struct {
	activity func(agent.Activity)
	tools    map[string]string // tool_id -> tool_name
	calls    int
	text     strings.Builder // assistant text since the last tool call
	allText  strings.Builder
	denied   []string // tools refused by the approval mode or policy
	denials  []agent.Denial
	details  map[string]string // tool_id -> what the call was for
	warnings []string          // error events (loop detected, invalid stream, ...)
	result   *geminiResult
}

type geminiEvent struct {
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Severity   string          `json:"severity"`
	Message    string          `json:"message"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"stats"`
}

// geminiResult is the run's last event.
type geminiResult struct {
	ok      bool
	errType string
	message string
	usage   agent.Usage
}

func (s *geminiStream) line(b []byte) {
	var e geminiEvent
	if json.Unmarshal(b, &e) != nil {
		return
	}
	switch e.Type {
	case "message":
		if e.Role == "assistant" {
			s.text.WriteString(e.Content)
			s.allText.WriteString(e.Content)
		}
	case "tool_use":
		s.calls++
		s.tools[e.ToolID] = e.ToolName
		s.text.Reset()
		detail := geminiDetail(e.ToolName, e.Parameters)
		if s.details == nil {
			s.details = map[string]string{}
		}
		s.details[e.ToolID] = detail
		s.activity(agent.Activity{Tool: e.ToolName, Detail: detail})
	case "tool_result":
		if e.Status == "error" && e.Error != nil && geminiRefused(e.Error.Type, e.Error.Message) {
			name := s.tools[e.ToolID]
			if name == "" {
				name = e.ToolID
			}
			if !slices.Contains(s.denied, name) {
				s.denied = append(s.denied, name)
			}
			d := agent.Denial{Tool: name, Path: s.details[e.ToolID], Why: geminiLine(e.Error.Message)}
			s.denials = append(s.denials, d)
			s.activity(agent.Activity{Tool: d.Tool, Detail: d.Path, Refused: true, Why: d.Why})
		}
	case "error":
		s.warnings = append(s.warnings, e.Message)
	case "result":
		r := &geminiResult{ok: e.Status == "success"}
		if e.Error != nil {
			r.errType, r.message = e.Error.Type, e.Error.Message
		}
		if e.Stats != nil {
			r.usage = agent.Usage{InputTokens: e.Stats.InputTokens, OutputTokens: e.Stats.OutputTokens, Known: true}
		}
		s.result = r
	}
}

// geminiRefused reports whether a tool error is Gemini CLI refusing the
// call (its approval mode or policy, a tool it does not offer, a path
// outside the workspace) rather than the tool failing.
func geminiRefused(kind, msg string) bool {
	switch kind {
	case "policy_violation", "tool_not_registered":
		return true
	}
	return strings.HasPrefix(msg, "Path not in workspace")
}

// geminiDetail is the one line shown for a tool call: the command, the
// file, the pattern, else the parameters.
func geminiDetail(tool string, params json.RawMessage) string {
	var p map[string]any
	json.Unmarshal(params, &p)
	for _, k := range []string{"command", "file_path", "dir_path", "path", "pattern", "query", "url", "agent_name"} {
		if v, ok := p[k].(string); ok && v != "" {
			return geminiLine(v)
		}
	}
	if len(p) == 0 {
		return ""
	}
	return geminiLine(string(params))
}

// geminiLine cuts s to its first line and at most 200 bytes.
func geminiLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return brief.Cut(s, 200)
}

var errGeminiRateLimited = errors.New("rate limited")

// outcome classifies a finished run.
func (s *geminiStream) outcome(role agent.Role, res ProcessResult, watch *geminiRetries, cause error) (agent.Result, error) {
	var usage agent.Usage
	if s.result != nil {
		usage = s.result.usage
	}
	fail := func(kind agent.Kind, reason string) (agent.Result, error) {
		return agent.Result{}, &agent.AttemptError{Kind: kind, Reason: reason, Usage: usage}
	}
	failure, retries, after := watch.seen()
	if errors.Is(cause, errGeminiRateLimited) && res.CtxErr != nil {
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindRateLimit, RetryAfter: after, Usage: usage,
			Reason: fmt.Sprintf("the model call failed with %s and gemini retried it %d times; stopped, process tree killed", failure, retries)}
	}
	if f := res.Failure(); f != nil && f.Kind != agent.KindCrash {
		if f.Kind == agent.KindTimeout && retries > 0 && s.result == nil {
			// It spent its time retrying the model, not working.
			return agent.Result{}, &agent.AttemptError{Kind: agent.KindRateLimit, RetryAfter: after, Usage: usage,
				Reason: fmt.Sprintf("the model call kept failing with %s until the deadline (%s)", failure, f.Reason)}
		}
		f.Usage = usage
		return agent.Result{}, f
	}
	if r := s.result; r != nil && !r.ok {
		return s.apiError(r.message, res, usage)
	}
	if f := res.Failure(); f != nil {
		if geminiQuota().MatchString(string(res.Stderr)) {
			return s.apiError(geminiHint(res.Stderr), res, usage)
		}
		if res.State != nil && res.Err == nil && res.WriteErr == nil {
			// Its last stderr line is usually a stack frame: say what it said.
			f.Reason = fmt.Sprintf("agent exited with %s%s", res.State, geminiStderrHint(res.Stderr))
		}
		f.Usage = usage
		return agent.Result{}, f
	}
	if s.result == nil {
		return fail(agent.KindMalformed, "gemini ended without a result event"+geminiStderrHint(res.Stderr))
	}
	final := s.text.String()
	answer, ok := prompt.ExtractJSON(final)
	if !ok {
		answer, ok = prompt.ExtractJSON(s.allText.String())
	}
	var r agent.Result
	var err error
	if ok {
		r, err = agent.Decode(role, answer)
	} else {
		err = agent.ErrNoJSON
	}
	if err != nil {
		if len(s.denied) > 0 {
			return fail(agent.KindPermission, fmt.Sprintf("refused by the %s role's approval mode: %s; then no valid answer (%v)", role, strings.Join(s.denied, ", "), err))
		}
		said := strings.TrimSpace(s.allText.String())
		if said == "" && len(s.warnings) > 0 {
			return fail(agent.KindMalformed, fmt.Sprintf("no answer; gemini said: %s", geminiLine(s.warnings[len(s.warnings)-1])))
		}
		return fail(agent.KindMalformed, agent.MalformedReason(role, err, said))
	}
	r.Usage = usage
	r.ToolCalls = s.calls
	r.Denials = s.denials
	return r, nil
}

// apiError classifies an error gemini reported: an exhausted quota stops
// the loop (UsageLimit), a rate limit or overload is retried later, the
// rest is the agent's error.
func (s *geminiStream) apiError(msg string, res ProcessResult, usage agent.Usage) (agent.Result, error) {
	msg = strings.TrimSpace(msg)
	first := geminiLine(msg)
	delay := geminiDelay(msg)
	switch {
	case geminiQuota().MatchString(msg) || delay > geminiMaxRetryDelay:
		r := agent.Result{UsageLimit: true, Summary: first, Usage: usage}
		switch {
		case delay > 0:
			r.RetryAt = time.Now().Add(delay).UTC().Format(time.RFC3339)
		case strings.Contains(msg, "daily quota"):
			r.RetryAt = geminiQuotaReset(time.Now())
		}
		return r, nil
	case delay > 0 || geminiRateLimit().MatchString(msg) || res.State != nil && slices.Contains([]int{429 & 0xff, 503 & 0xff, 529 & 0xff}, res.State.ExitCode()):
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindRateLimit, RetryAfter: delay, Usage: usage, Reason: "rate limited: " + first}
	}
	if first == "" {
		first = "no message" + geminiStderrHint(res.Stderr)
	}
	return agent.Result{}, &agent.AttemptError{Kind: agent.KindAgent, Usage: usage, Reason: "gemini reported an error: " + first}
}

// geminiMaxRetryDelay is where Gemini CLI itself stops calling a quota
// retryable (MAX_RETRYABLE_DELAY_SECONDS).
const geminiMaxRetryDelay = 300 * time.Second

var (
	// geminiQuota matches Gemini CLI's terminal quota errors (a per-day
	// quota, a plan's capacity or credits).
	geminiQuota     = lazyRegexp(`(?i)daily quota|TerminalQuotaError|QUOTA_EXHAUSTED|INSUFFICIENT_G1_CREDITS|limit:\s*0\b`)
	geminiRateLimit = lazyRegexp(`(?i)\b(429|503|529)\b|RESOURCE_EXHAUSTED|UNAVAILABLE|overloaded|rate limit|too many requests|try again later`)
	geminiRetryIn   = lazyRegexp(`(?:Please retry in|Suggested retry after|"retryDelay":\s*")\s*([0-9.]+)(ms|s)`)
	// Gemini CLI's lines about its own retries of a model call (see its
	// retryWithBackoff): with the HTTP status, with a quota error's message,
	// or bare (a network error).
	geminiAttempt = lazyRegexp(`Attempt (\d+) failed(?: with (?:status )?(\d{3})|:|\. Retrying)`)
)

// geminiDelay is the wait a message asks for, or 0.
func geminiDelay(msg string) time.Duration {
	m := geminiRetryIn().FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0
	}
	if m[2] == "ms" {
		return time.Duration(v * float64(time.Millisecond))
	}
	return time.Duration(v * float64(time.Second))
}

// geminiQuotaReset is when the Gemini API's per-day quotas reset
// (midnight Pacific time), or "" without time zone data.
func geminiQuotaReset(now time.Time) string {
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		return ""
	}
	n := now.In(loc)
	return time.Date(n.Year(), n.Month(), n.Day()+1, 0, 0, 0, 0, loc).UTC().Format(time.RFC3339)
}

// geminiRetries watches gemini's output (its stderr, through the log) for
// its own retries of a failed model call, and stops the run once it has
// retried limit times.
type geminiRetries struct {
	limit  int
	stop   context.CancelCauseFunc
	notify func(agent.Activity) // told of each retry once
	told   int

	mu      sync.Mutex
	tail    []byte // the end of the previous write, for a line split in two
	failure string // "HTTP 429", "a quota error", "a network error"
	attempt int
	after   time.Duration
}

func (w *geminiRetries) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := append(w.tail, p...)
	for _, m := range geminiAttempt().FindAllSubmatchIndex(buf, -1) {
		n, _ := strconv.Atoi(string(buf[m[2]:m[3]]))
		switch {
		case m[4] >= 0:
			code, _ := strconv.Atoi(string(buf[m[4]:m[5]]))
			if code != 429 && code < 500 {
				continue
			}
			w.failure = fmt.Sprintf("HTTP %d", code)
		case buf[m[1]-1] == ':':
			// Only quota errors (429, 499, 503) that said how long to wait
			// are logged this way.
			w.failure = "a quota error"
		default:
			w.failure = "a network error"
		}
		w.attempt = max(w.attempt, n)
		rest := buf[m[1]:min(len(buf), m[1]+400)]
		if i := bytes.Index(rest, []byte("Attempt ")); i >= 0 {
			rest = rest[:i]
		}
		if d := geminiDelay(string(rest)); d > 0 {
			w.after = d
		}
	}
	if w.attempt > w.told && w.notify != nil {
		w.told = w.attempt
		detail := fmt.Sprintf("the model call failed with %s; gemini calls it again (retry %d)", w.failure, w.attempt)
		if w.after > 0 {
			detail = fmt.Sprintf("the model call failed with %s; gemini calls it again in %s (retry %d)", w.failure, w.after.Round(100*time.Millisecond), w.attempt)
		}
		w.notify(agent.Activity{Retry: true, Detail: detail})
	}
	if w.attempt >= w.limit {
		w.stop(errGeminiRateLimited)
	}
	const keep = 512
	w.tail = append([]byte(nil), buf[max(0, len(buf)-keep):]...)
	return len(p), nil
}

// seen is what the failing model calls answered, how many retries gemini
// started and the wait the model asked for.
func (w *geminiRetries) seen() (failure string, retries int, after time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure, w.attempt, w.after
}

// geminiHint is the last meaningful line of gemini's stderr: not a stack
// frame, a closing brace or one of its start-up notices.
func geminiHint(stderr []byte) string {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(geminiStripANSI(lines[i]))
		switch {
		case l == "", strings.HasPrefix(l, "at "), strings.Trim(l, "{}[](),; ") == "",
			strings.HasPrefix(l, "Warning: 256-color"), strings.HasPrefix(l, "Ripgrep is not available"),
			strings.HasPrefix(l, "[STARTUP]"), strings.HasPrefix(l, "YOLO mode is enabled"):
			continue
		}
		return geminiLine(l)
	}
	return ""
}

func geminiStderrHint(stderr []byte) string {
	if h := geminiHint(stderr); h != "" {
		return fmt.Sprintf("; its stderr says: %q", h)
	}
	return ""
}

var geminiANSI = lazyRegexp(`\x1b\[[0-9;]*m`)

func geminiStripANSI(s string) string { return geminiANSI().ReplaceAllString(s, "") }
