package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// reply is a resolved answer: text and tool_use blocks only.
type reply struct {
	blocks []Block
	usage  Usage
	model  string
	seq    int
}

func (r reply) hasToolUse() bool {
	for _, b := range r.blocks {
		if b.Type == "tool_use" {
			return true
		}
	}
	return false
}

// input is a tool_use block's input, compact and never empty.
func input(b Block) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b.Input) != nil || buf.Len() == 0 {
		return json.RawMessage(`{}`)
	}
	return buf.Bytes()
}

// callID makes a tool call id unique within the server's life.
func callID(prefix string, seq, i int) string {
	return fmt.Sprintf("%s%04d_%d", prefix, seq, i)
}

// halves splits s in two, at a rune boundary, so streaming clients see
// more than one delta.
func halves(s string) []string {
	mid := len(s) / 2
	for mid > 0 && !utf8.RuneStart(s[mid]) {
		mid--
	}
	if mid == 0 {
		return []string{s}
	}
	return []string{s[:mid], s[mid:]}
}

// events writes server-sent events, flushing each.
type events struct {
	w http.ResponseWriter
}

func startEvents(w http.ResponseWriter) events {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return events{w}
}

// send writes one event; name may be empty. data is JSON-encoded unless it
// is a string.
func (e events) send(name string, data any) {
	var payload []byte
	if s, ok := data.(string); ok {
		payload = []byte(s)
	} else {
		payload = marshal(data)
	}
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", payload)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

func now() int64 { return time.Now().Unix() }

func errorStatus(e *ErrorReply) int {
	if e.Status == 0 {
		return http.StatusTooManyRequests
	}
	return e.Status
}

// writeError answers with e in protocol's error shape.
func writeError(w http.ResponseWriter, protocol string, e *ErrorReply) {
	status := errorStatus(e)
	h := w.Header()
	for k, v := range e.Headers {
		h.Set(k, v)
	}
	if e.RetryAfter != "" {
		h.Set("Retry-After", e.RetryAfter)
	}
	if len(e.Body) > 0 {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(e.Body)
		return
	}
	var body any
	switch protocol {
	case Anthropic:
		body = anthropicError(h, status, e)
	case Responses, Chat:
		body = openAIError(protocol, status, e)
	case Gemini:
		body = geminiError(status, e)
	}
	writeJSON(w, status, body)
}

func message(e *ErrorReply, fallback string) string {
	if e.Message != "" {
		return e.Message
	}
	return fallback
}

func anthropicError(h http.Header, status int, e *ErrorReply) any {
	typ, msg := "api_error", "Internal server error"
	switch {
	case e.Kind == "usage_limit":
		// What a subscription's exhausted quota looks like: rejected unified
		// limit with a reset time, and no retry.
		typ, msg = "rate_limit_error", "This request would exceed your account's rate limit. Please try again later."
		reset := fmt.Sprint(time.Now().Add(time.Hour).Unix())
		h.Set("Anthropic-Ratelimit-Unified-Status", "rejected")
		h.Set("Anthropic-Ratelimit-Unified-Reset", reset)
		h.Set("X-Should-Retry", "false")
	case status == 429:
		typ, msg = "rate_limit_error", "Number of requests has exceeded your rate limit."
	case status == 529:
		typ, msg = "overloaded_error", "Overloaded"
	case status == 400:
		typ, msg = "invalid_request_error", "Invalid request"
	case status == 401:
		typ, msg = "authentication_error", "invalid x-api-key"
	case status == 403:
		typ, msg = "permission_error", "Permission denied"
	case status == 404:
		typ, msg = "not_found_error", "Not found"
	}
	return object{"type": "error", "error": object{"type": typ, "message": message(e, msg)}, "request_id": "req_fake"}
}

func openAIError(protocol string, status int, e *ErrorReply) any {
	typ, code, msg := "server_error", any(nil), "The server had an error while processing your request."
	switch {
	case e.Kind == "usage_limit" && protocol == Responses:
		// Codex's shape for an exhausted ChatGPT plan.
		return object{"error": object{"type": "usage_limit_reached",
			"message":           message(e, "The usage limit has been reached"),
			"plan_type":         "plus",
			"resets_at":         time.Now().Add(time.Hour).Unix(),
			"resets_in_seconds": 3600}}
	case e.Kind == "usage_limit":
		typ, code, msg = "insufficient_quota", "insufficient_quota",
			"You exceeded your current quota, please check your plan and billing details."
	case status == 429:
		typ, code, msg = "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."
	case status == 503 || status == 529:
		typ, msg = "server_error", "The engine is currently overloaded, please try again later."
	case status == 400:
		typ, msg = "invalid_request_error", "Invalid request"
	case status == 401:
		typ, code, msg = "invalid_request_error", "invalid_api_key", "Incorrect API key provided."
	}
	return object{"error": object{"message": message(e, msg), "type": typ, "param": nil, "code": code}}
}

func geminiError(status int, e *ErrorReply) any {
	code, msg := "INTERNAL", "An internal error has occurred."
	var details []any
	switch {
	case e.Kind == "usage_limit":
		// A per-day quota: Gemini CLI treats it as terminal, not retryable.
		code, msg = "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details."
		details = []any{
			object{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{object{
				"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
				"quotaId":     "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
				"quotaValue":  "250"}}},
		}
	case status == 429:
		code, msg = "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."
		if e.RetryAfter != "" {
			details = []any{object{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": e.RetryAfter + "s"}}
		}
	case status == 503 || status == 529:
		code, msg = "UNAVAILABLE", "The model is overloaded. Please try again later."
	case status == 400:
		code, msg = "INVALID_ARGUMENT", "Invalid request"
	case status == 403:
		code, msg = "PERMISSION_DENIED", "Permission denied"
	case status == 404:
		code, msg = "NOT_FOUND", "Not found"
	}
	inner := object{"code": status, "message": message(e, msg), "status": code}
	if details != nil {
		inner["details"] = details
	}
	return object{"error": inner}
}

// marshal encodes v as compact JSON without HTML escaping (a tool input like
// "echo hi > out.txt" stays readable in the log).
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("null")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
