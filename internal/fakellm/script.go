package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// Script is what the server answers. It is protocol-neutral: the same script
// drives Claude Code (Anthropic Messages), Codex (OpenAI Responses), Gemini
// CLI (generateContent) and Chat Completions clients. For example, a model
// that is rate-limited once, then runs a shell command, then answers:
//
//	{"conversations": [{"match": "do the thing", "require_tools": true, "turns": [
//	  {"type": "error", "status": 429, "retry_after": "1", "times": 1},
//	  [{"type": "tool_use", "name": "Bash", "input": {"command": "echo hi > out.txt"}}],
//	  {"blocks": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 900, "output_tokens": 40}}
//	]}],
//	 "default": [{"type": "text", "text": "ok"}]}
type Script struct {
	Conversations []Conversation `json:"conversations"`
	// Default answers a request that matches no conversation. Empty means a
	// single text block "ok".
	Default []Block `json:"default,omitempty"`
}

// Conversation is one scripted dialogue, chosen by what the client sent
// before the model's first reply. The first conversation whose conditions
// all hold wins.
type Conversation struct {
	// Match must be a substring of all user text sent before the first model
	// reply, concatenated (Codex sends its environment context as a separate
	// user item ahead of the prompt). Empty matches everything.
	Match string `json:"match"`
	// SystemContains must be a substring of the system prompt.
	SystemContains string `json:"system_contains,omitempty"`
	// RequireTools skips requests that offer no tools (title generation and
	// other side calls).
	RequireTools bool `json:"require_tools,omitempty"`
	// Turns are the model's replies in order; see Turn for how a request is
	// mapped to one.
	Turns []Turn `json:"turns"`
}

// Turn is one entry of a conversation's turns. In JSON it is either a list
// of blocks (a plain reply) or an object:
//
//	{"blocks": [...], "usage": {...}, "delay_ms": 500}    a reply with options
//	{"type": "error", "status": 429, "times": 2, ...}      an error answer
//
// A request whose history holds N model replies gets the N-th reply entry
// (counting from zero). Error entries do not count: they belong to the reply
// entry that follows them. An error entry with Times > 0 answers that many
// requests for its turn and is then passed over, so the next request for the
// same turn falls through to the following entry; with Times == 0 it answers
// every time (a persistent outage). The served counts are the server's only
// state about the script; parallel callers that reach the same entry share
// them.
type Turn struct {
	Blocks []Block `json:"blocks,omitempty"`
	// Usage overrides the token counts reported for this reply.
	Usage *Usage `json:"usage,omitempty"`
	// DelayMS holds the answer back this long (a slow or hung model). The
	// wait ends early when the client disconnects or the server closes.
	DelayMS int `json:"delay_ms,omitempty"`
	// Error, when set, makes this an error entry.
	Error *ErrorReply `json:"-"`
	Times int         `json:"-"`
}

// Usage is the token accounting reported with a reply; without one a reply
// reports 100 input and 20 output tokens.
type Usage struct {
	InputTokens         int `json:"input_tokens"`
	OutputTokens        int `json:"output_tokens"`
	CacheReadTokens     int `json:"cache_read_input_tokens,omitempty"`
	CacheCreationTokens int `json:"cache_creation_input_tokens,omitempty"`
}

// defaultUsage is reported when a turn sets none.
func defaultUsage() Usage { return Usage{InputTokens: 100, OutputTokens: 20} }

// ErrorReply is an HTTP error answer.
type ErrorReply struct {
	// Status is the HTTP status (429, 500, 503, 529, ...). Zero means 429.
	Status int `json:"status,omitempty"`
	// Kind "usage_limit" answers with each protocol's quota-exhausted shape
	// (Anthropic rate_limit_error, OpenAI usage_limit_reached /
	// insufficient_quota, Gemini RESOURCE_EXHAUSTED per-day quota) instead
	// of a plain error for Status.
	Kind string `json:"kind,omitempty"`
	// RetryAfter is sent as the Retry-After header when not empty.
	RetryAfter string `json:"retry_after,omitempty"`
	// Body replaces the protocol's default error body.
	Body json.RawMessage `json:"body,omitempty"`
	// Message goes into the default body.
	Message string `json:"message,omitempty"`
	// Headers are extra response headers.
	Headers map[string]string `json:"headers,omitempty"`
}

// Block is one piece of a reply.
//
//	{"type": "text", "text": "..."}
//	{"type": "tool_use", "name": "Bash", "input": {...}}
//	{"type": "tool_use", "name": "spawn_agent", "namespace": "multi_agent_v1", "input": {...}}
//	{"type": "final", "json": {...}}
//
// A tool_use gets a generated call id. Namespace is used by the Responses
// protocol only (Codex's namespaced tools). A final block is a call of the
// client's StructuredOutput tool when the request offers one, and the JSON
// as text otherwise. Any string "{{re:REGEX}}" inside a tool input is
// replaced by REGEX's first capture group (or whole match) searched in what
// the client sent after the model's previous reply, typically a tool's
// output; no match gives "".
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Name      string          `json:"name,omitempty"`
	Namespace string          `json:"namespace,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	JSON      json.RawMessage `json:"json,omitempty"`
}

// LoadScript reads and parses a script file.
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("read script: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseScript parses and checks a script.
func ParseScript(data []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("parse script: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Script{}, err
	}
	return s, nil
}

// Validate reports the first malformed block or turn.
func (s Script) Validate() error {
	for i, b := range s.Default {
		if err := b.validate(); err != nil {
			return fmt.Errorf("default block %d: %w", i, err)
		}
	}
	for ci, c := range s.Conversations {
		for ti, t := range c.Turns {
			if t.Error != nil {
				if t.Times < 0 {
					return fmt.Errorf("conversation %d turn %d: negative times", ci, ti)
				}
				continue
			}
			for bi, b := range t.Blocks {
				if err := b.validate(); err != nil {
					return fmt.Errorf("conversation %d turn %d block %d: %w", ci, ti, bi, err)
				}
			}
		}
	}
	return nil
}

func (b Block) validate() error {
	switch b.Type {
	case "text":
	case "tool_use":
		if b.Name == "" {
			return fmt.Errorf("tool_use without a name")
		}
		if len(b.Input) > 0 && !isJSONObject(b.Input) {
			return fmt.Errorf("tool_use %s: input is not a JSON object", b.Name)
		}
	case "final":
		if len(b.JSON) == 0 {
			return fmt.Errorf("final block without json")
		}
	case "error":
		return fmt.Errorf("an error block must be a turn of its own")
	default:
		return fmt.Errorf("unknown block type %q", b.Type)
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// UnmarshalJSON accepts a list of blocks, an object with blocks and
// options, or an error object (also as the only element of a list).
func (t *Turn) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return err
		}
		if len(raws) == 1 && typeOf(raws[0]) == "error" {
			return t.UnmarshalJSON(raws[0])
		}
		*t = Turn{Blocks: []Block{}}
		for _, r := range raws {
			var b Block
			if err := strictUnmarshal(r, &b); err != nil {
				return err
			}
			t.Blocks = append(t.Blocks, b)
		}
		return nil
	}
	if typeOf(data) == "error" {
		var e struct {
			ErrorReply
			Type    string `json:"type"`
			Times   int    `json:"times"`
			DelayMS int    `json:"delay_ms"`
		}
		if err := strictUnmarshal(data, &e); err != nil {
			return err
		}
		*t = Turn{Error: &e.ErrorReply, Times: e.Times, DelayMS: e.DelayMS}
		return nil
	}
	type plain Turn // no UnmarshalJSON method
	var p plain
	if err := strictUnmarshal(data, &p); err != nil {
		return err
	}
	*t = Turn(p)
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (t Turn) MarshalJSON() ([]byte, error) {
	if t.Error != nil {
		return json.Marshal(struct {
			Type string `json:"type"`
			ErrorReply
			Times   int `json:"times,omitempty"`
			DelayMS int `json:"delay_ms,omitempty"`
		}{"error", *t.Error, t.Times, t.DelayMS})
	}
	if t.Usage == nil && t.DelayMS == 0 {
		if t.Blocks == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(t.Blocks)
	}
	type plain Turn
	return json.Marshal(plain(t))
}

func typeOf(raw json.RawMessage) string {
	var v struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return v.Type
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
