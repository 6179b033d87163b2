package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/aot-loop/aot/internal/agent"
)

// The anthropic backend calls the Messages API. It has no structured
// output (the API's JSON schemas must forbid extra keys, ours allow them):
// the prompt asks for one JSON object and prompt.ExtractJSON finds it.
func init() { register("anthropic", newAnthropic) }

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
	// The SDK's own environment lookup (profiles, federation) is off: the
	// key comes from Env, so what runs is what the agents file says.
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithMaxRetries(0)}
	key, from := llmAPIKey(s, env, "ANTHROPIC_API_KEY")
	switch token := env.Getenv("ANTHROPIC_AUTH_TOKEN"); {
	case key != "":
		opts = append(opts, option.WithAPIKey(key))
	case s.APIKeyEnv == "" && token != "":
		opts = append(opts, option.WithAuthToken(token))
	default:
		return nil, fmt.Errorf("no API key: $%s is empty", from)
	}
	base := s.BaseURL
	if base == "" {
		base = env.Getenv("ANTHROPIC_BASE_URL")
	}
	if base != "" {
		opts = append(opts, option.WithBaseURL(base))
	}
	if env.Timeout > 0 {
		// Else the SDK refuses a large max_tokens without streaming; the
		// attempt's deadline bounds the request anyway.
		opts = append(opts, option.WithRequestTimeout(env.Timeout))
	}
	c := anthropic.NewClient(opts...)
	l := &llm{name: "anthropic", model: s.Model, env: env}
	l.complete = func(ctx context.Context, q llmRequest) (llmReply, error) {
		return anthropicMessage(ctx, c, s.Model, o.MaxTokens, q)
	}
	return l, nil
}

func anthropicMessage(ctx context.Context, c anthropic.Client, model string, maxTokens int64, q llmRequest) (llmReply, error) {
	msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: maxTokens,
		System:    []anthropic.TextBlockParam{{Text: q.System}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q.Prompt))},
	})
	if err != nil {
		return llmReply{}, anthropicFailure(err)
	}
	u := msg.Usage
	rep := llmReply{Truncated: msg.StopReason == anthropic.StopReasonMaxTokens,
		Usage: agent.Usage{InputTokens: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
			OutputTokens: u.OutputTokens, Known: msg.JSON.Usage.Valid()}}
	var text strings.Builder
	for _, b := range msg.Content {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	rep.Text = text.String()
	if msg.StopReason == anthropic.StopReasonRefusal {
		rep.Refusal = "stop reason refusal"
	}
	return rep, nil
}

// regainAccess finds the reset time in the API's spend-limit message
// ("You will regain access on 2025-07-01 at 00:00 UTC.").
var regainAccess = regexp.MustCompile(`regain access on (\d{4}-\d{2}-\d{2}) at (\d{2}:\d{2}) UTC`)

// anthropicFailure reduces an API error to an *apiFailure. Usage limits:
// a subscription's rejected unified limit (429 with
// anthropic-ratelimit-unified-status: rejected and the reset time), a
// billing_error, and the 400s for spent credit or a reached spend limit,
// which only their message tells apart from other bad requests.
func anthropicFailure(err error) error {
	var e *anthropic.Error
	if !errors.As(err, &e) {
		return err
	}
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal([]byte(e.RawJSON()), &body)
	f := &apiFailure{Status: e.StatusCode, Message: body.Error.Message}
	if body.Error.Type != "" {
		f.Message = body.Error.Type + ": " + f.Message
	}
	if f.Message == "" {
		f.Message = strings.TrimSpace(e.RawJSON())
	}
	if e.Response == nil {
		return f
	}
	h := e.Response.Header
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
		if m := regainAccess.FindStringSubmatch(body.Error.Message); m != nil {
			if at, err := time.Parse("2006-01-02 15:04", m[1]+" "+m[2]); err == nil {
				f.RetryAt = at.UTC().Format(time.RFC3339)
			}
		}
	}
	return f
}
