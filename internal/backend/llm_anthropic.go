package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
)

// The anthropic backend calls the Messages API. It has no structured
// output (the API's JSON schemas must forbid extra keys, ours allow them):
// the prompt asks for one JSON object and prompt.ExtractJSON finds it.

const (
	anthropicBaseURL = "https://api.anthropic.com"
	// anthropicVersion is the Messages API version the requests are written for.
	anthropicVersion = "2023-06-01"
)

func newAnthropic(s Spec, env Env) (agent.Agent, error) {
	if err := llmCheckModel("anthropic", s); err != nil {
		return nil, err
	}
	o, err := parseLLMOptions("anthropic", s.Args)
	if err != nil {
		return nil, err
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = defaultMaxTokens
	}
	// The key comes from Env alone, so what runs is what the agents file says.
	h := http.Header{"Anthropic-Version": {anthropicVersion}}
	key, from := llmAPIKey(s, env, "ANTHROPIC_API_KEY")
	switch token := env.Getenv("ANTHROPIC_AUTH_TOKEN"); {
	case key != "":
		h.Set("X-Api-Key", key)
	case s.APIKeyEnv == "" && token != "":
		h.Set("Authorization", "Bearer "+token)
	default:
		return nil, fmt.Errorf("no API key: $%s is empty", from)
	}
	base := s.BaseURL
	if base == "" {
		base = env.Getenv("ANTHROPIC_BASE_URL")
	}
	if base == "" {
		base = anthropicBaseURL
	}
	url := llmEndpoint(base, "v1/messages")
	l := &llm{name: "anthropic", model: s.Model, env: env}
	l.complete = func(ctx context.Context, q llmRequest) (llmReply, error) {
		return anthropicMessage(ctx, url, h.Clone(), s.Model, o.MaxTokens, q)
	}
	return l, nil
}

type anthropicText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func anthropicMessage(ctx context.Context, url string, h http.Header, model string, maxTokens int64, q llmRequest) (llmReply, error) {
	type message struct {
		Role    string          `json:"role"`
		Content []anthropicText `json:"content"`
	}
	in := struct {
		Model     string          `json:"model"`
		MaxTokens int64           `json:"max_tokens"`
		System    []anthropicText `json:"system"`
		Messages  []message       `json:"messages"`
	}{Model: model, MaxTokens: maxTokens, System: []anthropicText{{"text", q.System}},
		Messages: []message{{Role: "user", Content: []anthropicText{{"text", q.Prompt}}}}}
	var out struct {
		Content    []anthropicText `json:"content"`
		StopReason string          `json:"stop_reason"`
		Usage      *struct {
			InputTokens              int64 `json:"input_tokens"`
			OutputTokens             int64 `json:"output_tokens"`
			CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
			CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
	if err := llmPost(ctx, url, h, in, &out); err != nil {
		return llmReply{}, anthropicFailure(err)
	}
	rep := llmReply{Truncated: out.StopReason == "max_tokens"}
	if u := out.Usage; u != nil {
		rep.Usage = agent.Usage{InputTokens: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
			OutputTokens: u.OutputTokens, Known: true}
	}
	var text strings.Builder
	for _, b := range out.Content {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	rep.Text = text.String()
	if out.StopReason == "refusal" {
		rep.Refusal = "stop reason refusal"
	}
	return rep, nil
}

// regainAccess finds the reset time in the API's spend-limit message
// ("You will regain access on 2025-07-01 at 00:00 UTC.").
var regainAccess = lazyRegexp(`regain access on (\d{4}-\d{2}-\d{2}) at (\d{2}:\d{2}) UTC`)

// anthropicFailure reduces an error status to an *apiFailure. Usage limits:
// a subscription's rejected unified limit (429 with
// anthropic-ratelimit-unified-status: rejected and the reset time), a
// billing_error, and the 400s for spent credit or a reached spend limit,
// which only their message tells apart from other bad requests. Other
// errors pass unchanged.
func anthropicFailure(err error) error {
	var e *llmErrorStatus
	if !errors.As(err, &e) {
		return err
	}
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(e.Body, &body)
	f := &apiFailure{Status: e.Status, Message: body.Error.Message}
	if body.Error.Type != "" {
		f.Message = body.Error.Type + ": " + f.Message
	}
	if f.Message == "" {
		f.Message = strings.TrimSpace(string(e.Body))
	}
	h := e.Header
	f.RetryAfter = llmRetryAfter(h, time.Now())
	msg := strings.ToLower(body.Error.Message)
	switch {
	case h.Get("Anthropic-Ratelimit-Unified-Status") == "rejected":
		f.UsageLimit = true
		if sec, err := strconv.ParseInt(h.Get("Anthropic-Ratelimit-Unified-Reset"), 10, 64); err == nil && sec > 0 {
			f.RetryAt = time.Unix(sec, 0).UTC().Format(time.RFC3339)
		}
	case body.Error.Type == "billing_error", strings.Contains(msg, "credit balance is too low"):
		f.UsageLimit = true
	case strings.Contains(msg, "usage limit"):
		f.UsageLimit = true
		if m := regainAccess().FindStringSubmatch(body.Error.Message); m != nil {
			if at, err := time.Parse("2006-01-02 15:04", m[1]+" "+m[2]); err == nil {
				f.RetryAt = at.UTC().Format(time.RFC3339)
			}
		}
	}
	return f
}
