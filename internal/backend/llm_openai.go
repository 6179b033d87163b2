package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
)

// The openai backend speaks to any OpenAI-compatible endpoint: OpenAI
// itself, or Ollama, vLLM, LM Studio and other local servers with base_url
// (e.g. http://localhost:11434/v1). It uses Chat Completions, which they all
// speak; args "api=responses" switches to the Responses API.

// openaiBaseURL is where requests go without base_url or $OPENAI_BASE_URL.
const openaiBaseURL = "https://api.openai.com/v1"

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
	if base == "" {
		base = openaiBaseURL
	}
	c := openaiClient{base: base, key: key, model: s.Model, o: o}
	call := c.chat
	if o.API == "responses" {
		call = c.responses
	}
	l := &llm{name: "openai", model: s.Model, env: env}
	l.complete = call
	return l, nil
}

// openaiClient makes the requests of one openai backend.
type openaiClient struct {
	base, key, model string
	o                llmOptions
}

func (c openaiClient) post(ctx context.Context, path string, in, out any) error {
	h := http.Header{}
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	return openaiFailure(llmPost(ctx, llmEndpoint(c.base, path), h, in, out))
}

// openaiFormat is a response format: {"type": "json_schema", ...}.
type openaiFormat struct {
	Type string `json:"type"`
	// Chat Completions nests the schema; the Responses API does not.
	JSONSchema *openaiSchema `json:"json_schema,omitempty"`
	*openaiSchema
}

type openaiSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// format is the response format q asks for (nil: none).
func (c openaiClient) format(q llmRequest, nested bool) *openaiFormat {
	schema := llmSchema(q.Schema)
	switch {
	case c.o.ResponseFormat == "json_schema" && schema != nil:
		s := &openaiSchema{Name: "aot_" + string(q.Role) + "_answer", Schema: schema}
		if nested {
			return &openaiFormat{Type: "json_schema", JSONSchema: s}
		}
		return &openaiFormat{Type: "json_schema", openaiSchema: s}
	case c.o.ResponseFormat != "none":
		return &openaiFormat{Type: "json_object"}
	}
	return nil
}

type openaiMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chat makes a Chat Completions request.
func (c openaiClient) chat(ctx context.Context, q llmRequest) (llmReply, error) {
	in := struct {
		Model               string          `json:"model"`
		Messages            []openaiMessage `json:"messages"`
		MaxCompletionTokens int64           `json:"max_completion_tokens,omitempty"`
		ResponseFormat      *openaiFormat   `json:"response_format,omitempty"`
	}{Model: c.model, Messages: []openaiMessage{{"system", q.System}, {"user", q.Prompt}},
		MaxCompletionTokens: c.o.MaxTokens, ResponseFormat: c.format(q, true)}
	var out struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal *string `json:"refusal"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := c.post(ctx, "chat/completions", in, &out); err != nil {
		return llmReply{}, err
	}
	var rep llmReply
	if u := out.Usage; u != nil {
		rep.Usage = agent.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, Known: true}
	}
	if len(out.Choices) == 0 {
		return rep, nil
	}
	ch := out.Choices[0]
	rep.Text, rep.Refusal, rep.Truncated = deref(ch.Message.Content), deref(ch.Message.Refusal), ch.FinishReason == "length"
	return rep, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// responses makes a Responses API request, not stored on the server.
func (c openaiClient) responses(ctx context.Context, q llmRequest) (llmReply, error) {
	type text struct {
		Format *openaiFormat `json:"format,omitempty"`
	}
	in := struct {
		Model           string `json:"model"`
		Instructions    string `json:"instructions"`
		Input           string `json:"input"`
		Store           bool   `json:"store"`
		MaxOutputTokens int64  `json:"max_output_tokens,omitempty"`
		Text            *text  `json:"text,omitempty"`
	}{Model: c.model, Instructions: q.System, Input: q.Prompt, MaxOutputTokens: c.o.MaxTokens}
	if f := c.format(q, false); f != nil {
		in.Text = &text{Format: f}
	}
	var out struct {
		Status string `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Type    string `json:"type"`
				Text    string `json:"text"`
				Refusal string `json:"refusal"`
			} `json:"content"`
		} `json:"output"`
		Usage *struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := c.post(ctx, "responses", in, &out); err != nil {
		return llmReply{}, err
	}
	var rep llmReply
	if u := out.Usage; u != nil {
		rep.Usage = agent.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Known: true}
	}
	rep.Truncated = out.IncompleteDetails != nil && out.IncompleteDetails.Reason == "max_output_tokens"
	var b strings.Builder
	for _, item := range out.Output {
		for _, part := range item.Content {
			switch part.Type {
			case "output_text":
				if item.Type == "message" {
					b.WriteString(part.Text)
				}
			case "refusal":
				rep.Refusal += part.Refusal
			}
		}
	}
	rep.Text = b.String()
	if out.Status == "failed" && rep.Text == "" {
		var code, msg string
		if out.Error != nil {
			code, msg = out.Error.Code, out.Error.Message
		}
		return rep, fmt.Errorf("the response failed: %s %s", code, msg)
	}
	return rep, nil
}

// openaiFailure reduces an error status to an *apiFailure. An exhausted
// quota is "insufficient_quota" (API billing) or "usage_limit_reached" (a
// ChatGPT plan, with the time it resets); both are usage limits, not rate
// limits: waiting minutes does not help. Other errors pass unchanged.
func openaiFailure(err error) error {
	var e *llmErrorStatus
	if !errors.As(err, &e) {
		return err
	}
	// The error object: {"error": {"message", "type", "code", ...}}; some
	// compatible servers (Ollama) send {"error": "text"}.
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	var inner struct {
		Message  string `json:"message"`
		Type     string `json:"type"`
		Code     any    `json:"code"`
		ResetsAt int64  `json:"resets_at"`
	}
	json.Unmarshal(e.Body, &body)
	if json.Unmarshal(body.Error, &inner) != nil {
		json.Unmarshal(body.Error, &inner.Message)
	}
	code, _ := inner.Code.(string)
	f := &apiFailure{Status: e.Status, Message: inner.Message, RetryAfter: llmRetryAfter(e.Header, time.Now())}
	if f.Message == "" {
		f.Message = strings.TrimSpace(string(e.Body))
	}
	switch {
	case code == "insufficient_quota" || inner.Type == "insufficient_quota":
		f.UsageLimit = true
	case inner.Type == "usage_limit_reached" || code == "usage_limit_reached":
		f.UsageLimit = true
		if inner.ResetsAt > 0 {
			f.RetryAt = time.Unix(inner.ResetsAt, 0).UTC().Format(time.RFC3339)
		}
	}
	return f
}
