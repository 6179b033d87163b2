package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aot-loop/aot/internal/agent"
)

// The openai backend speaks to any OpenAI-compatible endpoint: OpenAI
// itself, or Ollama, vLLM, LM Studio and other local servers with base_url
// (e.g. http://localhost:11434/v1). It uses Chat Completions, which they all
// speak; args "api=responses" switches to the Responses API.
func init() { register("openai", newOpenAI) }

func newOpenAI(s Spec, env Env) (agent.Agent, error) {
	if err := llmCheckModel("openai", s); err != nil {
		return nil, err
	}
	o, err := parseLLMOptions("openai", s.Args)
	if err != nil {
		return nil, err
	}
	base := s.BaseURL
	if base == "" {
		base = env.Getenv("OPENAI_BASE_URL")
	}
	key, from := llmAPIKey(s, env, "OPENAI_API_KEY")
	if key == "" && base == "" {
		return nil, fmt.Errorf("no API key: $%s is empty (a local endpoint set with base_url may need none)", from)
	}
	opts := []option.RequestOption{option.WithMaxRetries(0), option.WithAPIKey(key)}
	if base != "" {
		opts = append(opts, option.WithBaseURL(base))
	}
	c := openai.NewClient(opts...)
	call := openaiChat
	if o.API == "responses" {
		call = openaiResponses
	}
	l := &llm{name: "openai", model: s.Model, env: env}
	l.complete = func(ctx context.Context, q llmRequest) (llmReply, error) { return call(ctx, c, s.Model, o, q) }
	return l, nil
}

// openaiChat makes a Chat Completions request.
func openaiChat(ctx context.Context, c openai.Client, model string, o llmOptions, q llmRequest) (llmReply, error) {
	p := openai.ChatCompletionNewParams{
		Model:    shared.ChatModel(model),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(q.System), openai.UserMessage(q.Prompt)},
	}
	if o.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(o.MaxTokens)
	}
	switch schema := llmSchema(q.Schema); {
	case o.ResponseFormat == "json_schema" && schema != nil:
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
			Name: "aot_" + string(q.Role) + "_answer", Schema: schema, Strict: openai.Bool(false)}}
	case o.ResponseFormat != "none":
		p.ResponseFormat.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
	}
	resp, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		return llmReply{}, openaiFailure(err)
	}
	rep := llmReply{Usage: agent.Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens,
		Known: resp.JSON.Usage.Valid()}}
	if len(resp.Choices) == 0 {
		return rep, nil
	}
	ch := resp.Choices[0]
	rep.Text, rep.Refusal, rep.Truncated = ch.Message.Content, ch.Message.Refusal, ch.FinishReason == "length"
	return rep, nil
}

// openaiResponses makes a Responses API request, not stored on the server.
func openaiResponses(ctx context.Context, c openai.Client, model string, o llmOptions, q llmRequest) (llmReply, error) {
	p := responses.ResponseNewParams{
		Model:        shared.ResponsesModel(model),
		Instructions: openai.String(q.System),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(q.Prompt)},
		Store:        openai.Bool(false),
	}
	if o.MaxTokens > 0 {
		p.MaxOutputTokens = openai.Int(o.MaxTokens)
	}
	switch schema := llmSchema(q.Schema); {
	case o.ResponseFormat == "json_schema" && schema != nil:
		p.Text.Format.OfJSONSchema = &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: "aot_" + string(q.Role) + "_answer", Schema: schema, Strict: openai.Bool(false)}
	case o.ResponseFormat != "none":
		p.Text.Format.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
	}
	resp, err := c.Responses.New(ctx, p)
	if err != nil {
		return llmReply{}, openaiFailure(err)
	}
	rep := llmReply{Text: resp.OutputText(), Truncated: resp.IncompleteDetails.Reason == "max_output_tokens",
		Usage: agent.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, Known: resp.JSON.Usage.Valid()}}
	for _, item := range resp.Output {
		for _, part := range item.Content {
			if part.Type == "refusal" {
				rep.Refusal += part.Refusal
			}
		}
	}
	if resp.Status == responses.ResponseStatusFailed && rep.Text == "" {
		return rep, fmt.Errorf("the response failed: %s %s", resp.Error.Code, resp.Error.Message)
	}
	return rep, nil
}

// llmSchema is a role's schema as the SDKs take it; nil when there is none.
func llmSchema(schema []byte) map[string]any {
	var m map[string]any
	if len(schema) == 0 || json.Unmarshal(schema, &m) != nil {
		return nil
	}
	return m
}

// openaiFailure reduces an API error to an *apiFailure. An exhausted quota
// is "insufficient_quota" (API billing) or "usage_limit_reached" (a
// ChatGPT plan, with the time it resets); both are usage limits, not rate
// limits: waiting minutes does not help.
func openaiFailure(err error) error {
	var e *openai.Error
	if !errors.As(err, &e) {
		return err
	}
	f := &apiFailure{Status: e.StatusCode, Message: e.Message}
	if f.Message == "" {
		f.Message = strings.TrimSpace(e.RawJSON())
	}
	if e.Response != nil {
		f.RetryAfter = llmRetryAfter(e.Response.Header, time.Now())
	}
	var extra struct {
		ResetsAt int64 `json:"resets_at"`
	}
	json.Unmarshal([]byte(e.RawJSON()), &extra)
	switch {
	case e.Code == "insufficient_quota" || e.Type == "insufficient_quota":
		f.UsageLimit = true
	case e.Type == "usage_limit_reached" || e.Code == "usage_limit_reached":
		f.UsageLimit = true
		if extra.ResetsAt > 0 {
			f.RetryAt = time.Unix(extra.ResetsAt, 0).UTC().Format(time.RFC3339)
		}
	}
	return f
}
