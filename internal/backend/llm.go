package backend

// The openai and anthropic backends call a model's HTTP API directly, with
// no tools: they serve the roles that only read what they are given
// (planner, judge, align). Probe, worker and verifier need to look at or
// change the workdir, so these backends refuse them; set roles.planner,
// roles.judge and roles.align to openai or anthropic and keep a CLI backend
// for the others:
//
//	agent: claude
//	roles:
//	  judge: {agent: openai, model: gpt-4.1-mini}
//	  planner: {agent: anthropic, model: claude-sonnet-4-5}
//	  align: {agent: openai, model: llama3.1, base_url: http://localhost:11434/v1}
//
// A judge gets the contents of the files in its check's scope in its
// prompt, since it cannot open them. Usage is the tokens the API reports;
// the cost stays 0 (no price table to go stale).
//
// Each backend makes exactly one request per attempt, with no retry of its
// own: a 429, 503 or 529 comes back at once as KindRateLimit with the
// provider's Retry-After, and the engine's backoff decides when to try
// again, as it does for every other backend.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/prompt"
)

// llm is a tool-less model behind an HTTP API.
type llm struct {
	name  string // the backend: "openai", "anthropic"
	model string
	env   Env
	// complete makes the one request of an attempt; its errors are
	// *apiFailure when the API answered with an error status.
	complete func(ctx context.Context, q llmRequest) (llmReply, error)
}

// llmRequest is one attempt's request, whatever the API.
type llmRequest struct {
	System string
	Prompt string
	// Schema is the role's answer schema (nil: none, as for align).
	Schema []byte
	Role   agent.Role
}

// llmReply is what the model answered.
type llmReply struct {
	Text  string
	Usage agent.Usage
	// Truncated says the answer hit the output token limit.
	Truncated bool
	// Refusal is the model's refusal text, when it refused.
	Refusal string
}

// apiFailure is an error status from the API, reduced to what
// classification needs.
type apiFailure struct {
	Status     int
	Message    string
	RetryAfter time.Duration
	// UsageLimit says the account's quota or credit is spent (not a
	// per-minute rate limit); RetryAt is when it resets (RFC 3339), if said.
	UsageLimit bool
	RetryAt    string
}

func (f *apiFailure) Error() string {
	if f.Message == "" {
		return fmt.Sprintf("HTTP %d %s", f.Status, http.StatusText(f.Status))
	}
	return fmt.Sprintf("HTTP %d: %s", f.Status, f.Message)
}

// llmOptions are the Spec.Args of an API backend, each "key=value".
type llmOptions struct {
	// API is "chat" (Chat Completions, the default: what local servers
	// speak) or "responses" (OpenAI's Responses API). openai only.
	API string
	// ResponseFormat is "json_schema" (the default: the role's schema,
	// not strict), "json_object" or "none". openai only.
	ResponseFormat string
	// MaxTokens bounds the answer (0: the API's default; anthropic, which
	// requires one, uses defaultMaxTokens).
	MaxTokens int64
}

// defaultMaxTokens is the anthropic backend's max_tokens: every current
// Claude model allows it without streaming.
const defaultMaxTokens = 8192

// parseLLMOptions reads s.Args for backend name.
func parseLLMOptions(name string, args []string) (llmOptions, error) {
	o := llmOptions{API: "chat", ResponseFormat: "json_schema"}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return o, fmt.Errorf("argument %q: the %s backend takes key=value arguments (%s)", a, name, llmArgKeys(name))
		}
		switch {
		case k == "max_tokens":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return o, fmt.Errorf("argument %q: max_tokens must be a positive integer", a)
			}
			o.MaxTokens = n
		case k == "api" && name == "openai":
			if v != "chat" && v != "responses" {
				return o, fmt.Errorf("argument %q: api is chat (Chat Completions) or responses (the Responses API)", a)
			}
			o.API = v
		case k == "response_format" && name == "openai":
			if v != "json_schema" && v != "json_object" && v != "none" {
				return o, fmt.Errorf("argument %q: response_format is json_schema, json_object or none", a)
			}
			o.ResponseFormat = v
		default:
			return o, fmt.Errorf("argument %q: unknown key %q (the %s backend takes %s)", a, k, name, llmArgKeys(name))
		}
	}
	return o, nil
}

func llmArgKeys(name string) string {
	if name == "openai" {
		return "api=chat|responses, response_format=json_schema|json_object|none, max_tokens=N"
	}
	return "max_tokens=N"
}

// llmCheckModel is the error of a Spec without a model.
func llmCheckModel(name string, s Spec) error {
	if s.Model == "" {
		return fmt.Errorf(`no model: the %s backend needs "model:" in the agents file or --model`, name)
	}
	return nil
}

// llmAPIKey reads the key from s.APIKeyEnv, else def.
func llmAPIKey(s Spec, env Env, def string) (key, from string) {
	from = s.APIKeyEnv
	if from == "" {
		from = def
	}
	return env.Getenv(from), from
}

// llmToolless says whether a tool-less model can play role.
func llmToolless(role agent.Role) bool {
	return role == agent.Planner || role == agent.Judge || role == agent.Align
}

// llmSystem tells the model what it is and how to answer.
const llmSystem = "You are called through an API and have no tools: you cannot read files or run commands. " +
	"Everything you may use is in the message. Answer with exactly one JSON object in the format the message gives, and nothing else."

// Run asks the model once and decodes its answer.
func (l *llm) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	if !llmToolless(t.Role) {
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindCrash, Reason: fmt.Sprintf(
			"the %s backend has no tools: it can run the planner, judge and align roles, not %s (set roles.%s to a CLI backend)",
			l.name, t.Role, t.Role)}
	}
	text, err := l.env.Prompts.Render(t)
	if err != nil {
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindCrash, Reason: err.Error()}
	}
	if len(t.Files) > 0 {
		text = llmWithFiles(text, t.Workdir, t.Files)
	}
	if l.env.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.env.Timeout)
		defer cancel()
	}
	log, closeLog := openLog(l.env, t)
	logPrompt(log, text)
	defer closeLog()
	fmt.Fprintf(log, "%s request, model %s\n--- prompt ---\n%s", l.name, l.model, text)

	agent.ActivityFunc(ctx)(agent.Activity{Tool: "model", Detail: l.model + " request"})
	rep, err := l.complete(ctx, llmRequest{System: llmSystem, Prompt: text, Schema: prompt.Schema(t.Role), Role: t.Role})
	if err != nil {
		fmt.Fprintf(log, "--- error ---\n%v\n", err)
		return l.failure(ctx, err)
	}
	fmt.Fprintf(log, "--- answer (%d input, %d output tokens) ---\n%s\n", rep.Usage.InputTokens, rep.Usage.OutputTokens, rep.Text)
	return l.decode(t.Role, rep)
}

// decode reads the role's answer from the model's text.
func (l *llm) decode(role agent.Role, rep llmReply) (agent.Result, error) {
	fail := func(kind agent.Kind, format string, a ...any) (agent.Result, error) {
		return agent.Result{}, &agent.AttemptError{Kind: kind, Usage: rep.Usage, Reason: fmt.Sprintf(format, a...)}
	}
	if rep.Refusal != "" && strings.TrimSpace(rep.Text) == "" {
		return fail(agent.KindAgent, "%s model %s refused: %s", l.name, l.model, quoteText(rep.Refusal))
	}
	cut := ""
	if rep.Truncated {
		cut = " (the answer was cut short at the output token limit: raise max_tokens in args)"
	}
	data, ok := prompt.ExtractJSON(rep.Text)
	if !ok {
		return fail(agent.KindMalformed, "%s", agent.MalformedReason(role, fmt.Errorf("%w%s", agent.ErrNoJSON, cut), rep.Text))
	}
	r, err := agent.Decode(role, data)
	if err != nil {
		return fail(agent.KindMalformed, "%s", agent.MalformedReason(role, fmt.Errorf("%w%s", err, cut), rep.Text))
	}
	if r.UsageLimit {
		// A quota is the API's to report, in its status, never the
		// model's text.
		return fail(agent.KindMalformed, "%s answered usage_limit in its text, which only an API error can say: %s", l.model, quoteText(rep.Text))
	}
	r.Usage = rep.Usage
	return r, nil
}

// failure classifies an error of the request.
func (l *llm) failure(ctx context.Context, err error) (agent.Result, error) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		reason := fmt.Sprintf("%s model %s gave no answer before the deadline", l.name, l.model)
		if l.env.Timeout > 0 {
			reason = fmt.Sprintf("%s model %s gave no answer within %s", l.name, l.model, l.env.Timeout)
		}
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindTimeout, Reason: reason}
	case ctx.Err() != nil:
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindCancelled, Reason: "cancelled while waiting for " + l.model}
	}
	var f *apiFailure
	if !errors.As(err, &f) {
		if errors.Is(err, context.DeadlineExceeded) {
			return agent.Result{}, &agent.AttemptError{Kind: agent.KindTimeout, Reason: fmt.Sprintf("%s request timed out: %v", l.name, err)}
		}
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindCrash, Reason: fmt.Sprintf("%s request failed: %v", l.name, err)}
	}
	switch {
	case f.UsageLimit:
		return agent.Result{UsageLimit: true, RetryAt: f.RetryAt, Summary: fmt.Sprintf("%s: %v", l.name, f)}, nil
	case f.Status == http.StatusTooManyRequests || f.Status == http.StatusServiceUnavailable || f.Status == 529:
		return agent.Result{}, &agent.AttemptError{Kind: agent.KindRateLimit, RetryAfter: f.RetryAfter,
			Reason: fmt.Sprintf("%s model %s: %v", l.name, l.model, f)}
	}
	return agent.Result{}, &agent.AttemptError{Kind: agent.KindAgent, Reason: fmt.Sprintf("%s model %s: %v", l.name, l.model, f)}
}

// llmRetryAfter reads how long a response asks the client to wait:
// retry-after-ms, else Retry-After in seconds or as an HTTP date.
func llmRetryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// Limits on the file contents put into a judge's prompt.
const (
	maxFileShown  = 64 << 10
	maxFilesShown = 256 << 10
)

// llmWithFiles puts the contents of files (relative to workdir) into the
// prompt, before its answer section: a judge without tools must still see
// what it judges.
func llmWithFiles(text, workdir string, files []string) string {
	var b strings.Builder
	b.WriteString("## The contents of those files\n")
	b.WriteString("You cannot open files: here is each one as it is now, between BEGIN and END lines.\n")
	root, err := os.OpenRoot(workdir)
	if err != nil {
		fmt.Fprintf(&b, "(none can be shown: %v)\n", err)
	} else {
		defer root.Close()
		budget := maxFilesShown
		for _, name := range files {
			budget -= llmShowFile(&b, root, name, budget)
		}
	}
	files0 := b.String()
	if i := strings.LastIndex(text, "\n## Your answer"); i >= 0 {
		return text[:i+1] + files0 + "\n" + text[i+1:]
	}
	return text + "\n" + files0 + "\nNow give your answer in the format above.\n"
}

// llmShowFile writes one file's section and returns the content bytes shown.
func llmShowFile(b *strings.Builder, root *os.Root, name string, budget int) int {
	if budget <= 0 {
		fmt.Fprintf(b, "\n%s: not shown (the %d KiB for all files are spent)\n", name, maxFilesShown>>10)
		return 0
	}
	f, err := root.Open(name)
	if err != nil {
		fmt.Fprintf(b, "\n%s: cannot be read (%v)\n", name, err)
		return 0
	}
	defer f.Close()
	limit := min(maxFileShown, budget)
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		fmt.Fprintf(b, "\n%s: cannot be read (%v)\n", name, err)
		return 0
	}
	cut := len(data) > limit
	if cut {
		data = data[:limit]
		for len(data) > 0 && !utf8.Valid(data) && len(data) > limit-utf8.UTFMax {
			data = data[:len(data)-1]
		}
	}
	if !utf8.Valid(data) || strings.ContainsRune(string(data), 0) {
		fmt.Fprintf(b, "\n%s: binary, not shown\n", name)
		return 0
	}
	fmt.Fprintf(b, "\n----- BEGIN %s -----\n%s", name, data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		b.WriteString("\n")
	}
	if cut {
		fmt.Fprintf(b, "----- END %s (truncated: only its first %d bytes are shown) -----\n", name, len(data))
	} else {
		fmt.Fprintf(b, "----- END %s -----\n", name)
	}
	return len(data)
}
