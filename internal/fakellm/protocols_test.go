package fakellm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// toolThenText: the first turn runs a tool (with some text before it), the
// second answers text with its own usage.
const toolThenText = `{"conversations": [{"match": "do the thing", "turns": [
  [{"type": "text", "text": "I'll run it — now."},
   {"type": "tool_use", "name": "Bash", "namespace": "ns1", "input": {"command": "echo hi > out.txt"}}],
  {"blocks": [{"type": "text", "text": "Done."}], "usage": {"input_tokens": 7, "output_tokens": 3}}
]}]}`

func TestAnthropic(t *testing.T) {
	srv := start(t, toolThenText, Options{})
	url := srv.URL() + "/v1/messages?beta=true"
	first := []any{msg("user", "do the thing")}
	second := append(first,
		msg("assistant", []any{object{"type": "tool_use", "id": "t1", "name": "Bash", "input": object{}}}),
		msg("user", []any{object{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}}))

	t.Run("json", func(t *testing.T) {
		code, _, data := post(t, url, anthropicBody(false, first...))
		if code != 200 {
			t.Fatalf("status %d: %s", code, data)
		}
		m := decode(t, data)
		if got := field(m, "stop_reason"); got != "tool_use" {
			t.Errorf("stop_reason = %v", got)
		}
		if got := field(m, "content", 1, "input", "command"); got != "echo hi > out.txt" {
			t.Errorf("tool input command = %v", got)
		}
		if got := field(m, "content", 0, "text"); got != "I'll run it — now." {
			t.Errorf("text = %v", got)
		}
		m = decode(t, must(post(t, url, anthropicBody(false, second...))))
		want := object{"input_tokens": 7.0, "output_tokens": 3.0, "cache_creation_input_tokens": 0.0, "cache_read_input_tokens": 0.0}
		if diff := cmp.Diff(want, field(m, "usage")); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
		if got := field(m, "stop_reason"); got != "end_turn" {
			t.Errorf("stop_reason = %v", got)
		}
	})

	t.Run("stream", func(t *testing.T) {
		code, h, data := post(t, url, anthropicBody(true, first...))
		if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d, content type %q", code, h.Get("Content-Type"))
		}
		var names []string
		var text, js string
		var stop any
		for _, e := range parseSSE(t, data) {
			if e.name != e.data["type"] {
				t.Errorf("event %q carries type %v", e.name, e.data["type"])
			}
			names = append(names, e.name)
			switch e.name {
			case "content_block_delta":
				text += str(field(e.data, "delta", "text"))
				js += str(field(e.data, "delta", "partial_json"))
			case "message_delta":
				stop = field(e.data, "delta", "stop_reason")
				if field(e.data, "usage", "output_tokens") != 20.0 {
					t.Errorf("message_delta usage = %v", e.data["usage"])
				}
			}
		}
		want := []string{"message_start", "ping",
			"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
			"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
			"message_delta", "message_stop"}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if text != "I'll run it — now." || js != `{"command":"echo hi > out.txt"}` || stop != "tool_use" {
			t.Errorf("text %q, json %q, stop %v", text, js, stop)
		}
	})

	t.Run("count_tokens and HEAD", func(t *testing.T) {
		m := decode(t, must(post(t, srv.URL()+"/v1/messages/count_tokens?beta=true", anthropicBody(false, first...))))
		if m["input_tokens"] == nil {
			t.Errorf("count_tokens = %v", m)
		}
		resp, err := http.Head(srv.URL() + "/")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("HEAD /: %v %v", resp, err)
		}
		resp.Body.Close()
	})
}

func TestResponses(t *testing.T) {
	srv := start(t, toolThenText, Options{})
	url := srv.URL() + "/v1/responses"
	// Codex sends its environment context as a user item of its own.
	first := []any{object{"type": "message", "role": "developer", "content": "instructions"},
		item("user", "<environment_context>...</environment_context>"), item("user", "do the thing")}

	t.Run("json", func(t *testing.T) {
		m := decode(t, must(post(t, url, responsesBody(false, first...))))
		call := obj(field(m, "output", 1))
		if call["type"] != "function_call" || call["name"] != "Bash" || call["namespace"] != "ns1" ||
			call["arguments"] != `{"command":"echo hi > out.txt"}` || call["call_id"] == "" {
			t.Errorf("function call = %v", call)
		}
		if got := field(m, "output", 0, "content", 0, "text"); got != "I'll run it — now." {
			t.Errorf("text = %v", got)
		}
	})

	t.Run("stream", func(t *testing.T) {
		_, _, data := post(t, url, responsesBody(true, first...))
		var names []string
		var text, args string
		var last object
		for i, e := range parseSSE(t, data) {
			names = append(names, e.name)
			if e.data["sequence_number"] != float64(i) {
				t.Errorf("event %d has sequence_number %v", i, e.data["sequence_number"])
			}
			switch e.name {
			case "response.output_text.delta":
				text += str(e.data["delta"])
			case "response.function_call_arguments.delta":
				args += str(e.data["delta"])
			}
			last = e.data
		}
		want := []string{"response.created",
			"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done",
			"response.completed"}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if text != "I'll run it — now." || args != `{"command":"echo hi > out.txt"}` {
			t.Errorf("text %q, args %q", text, args)
		}
		if field(last, "response", "usage", "output_tokens") != 20.0 {
			t.Errorf("completed usage = %v", field(last, "response", "usage"))
		}
	})

	t.Run("second turn", func(t *testing.T) {
		hist := append(first,
			object{"type": "reasoning", "summary": []any{}},
			object{"type": "function_call", "name": "exec_command", "call_id": "c1", "arguments": "{}"},
			object{"type": "function_call_output", "call_id": "c1", "output": "ok"})
		m := decode(t, must(post(t, url, responsesBody(false, hist...))))
		if got := field(m, "output", 0, "content", 0, "text"); got != "Done." {
			t.Errorf("text = %v", got)
		}
		if got := field(m, "usage", "input_tokens"); got != 7.0 {
			t.Errorf("usage input_tokens = %v", got)
		}
	})
}

func TestChat(t *testing.T) {
	srv := start(t, toolThenText, Options{})
	url := srv.URL() + "/chat/completions"
	body := func(stream bool) object {
		return object{"model": "m", "stream": stream, "messages": []any{msg("system", "sys"), msg("user", "do the thing")},
			"tools": []any{object{"type": "function", "function": object{"name": "Bash"}}}}
	}

	t.Run("json", func(t *testing.T) {
		m := decode(t, must(post(t, url, body(false))))
		if got := field(m, "choices", 0, "finish_reason"); got != "tool_calls" {
			t.Errorf("finish_reason = %v", got)
		}
		if got := field(m, "choices", 0, "message", "tool_calls", 0, "function", "arguments"); got != `{"command":"echo hi > out.txt"}` {
			t.Errorf("arguments = %v", got)
		}
		if got := field(m, "choices", 0, "message", "content"); got != "I'll run it — now." {
			t.Errorf("content = %v", got)
		}
	})

	t.Run("stream", func(t *testing.T) {
		evs := parseSSE(t, must(post(t, url, body(true))))
		if evs[len(evs)-1].raw != "[DONE]" {
			t.Errorf("last event %q, want [DONE]", evs[len(evs)-1].raw)
		}
		var text, args, name string
		var finish any
		for _, e := range evs[:len(evs)-1] {
			text += str(field(e.data, "choices", 0, "delta", "content"))
			args += str(field(e.data, "choices", 0, "delta", "tool_calls", 0, "function", "arguments"))
			name += str(field(e.data, "choices", 0, "delta", "tool_calls", 0, "function", "name"))
			if f := field(e.data, "choices", 0, "finish_reason"); f != nil {
				finish = f
				if field(e.data, "usage", "completion_tokens") != 20.0 {
					t.Errorf("final chunk usage = %v", e.data["usage"])
				}
			}
		}
		if text != "I'll run it — now." || args != `{"command":"echo hi > out.txt"}` || name != "Bash" || finish != "tool_calls" {
			t.Errorf("text %q args %q name %q finish %v", text, args, name, finish)
		}
	})
}

func TestGemini(t *testing.T) {
	srv := start(t, toolThenText, Options{})
	body := geminiBody(content("user", "do the thing"))

	check := func(t *testing.T, m object) {
		t.Helper()
		if got := field(m, "candidates", 0, "content", "parts", 1, "functionCall", "args", "command"); got != "echo hi > out.txt" {
			t.Errorf("functionCall args = %v", got)
		}
		if got := field(m, "candidates", 0, "content", "parts", 0, "text"); got != "I'll run it — now." {
			t.Errorf("text = %v", got)
		}
		if got := field(m, "usageMetadata", "candidatesTokenCount"); got != 20.0 {
			t.Errorf("usageMetadata = %v", m["usageMetadata"])
		}
	}
	t.Run("generateContent", func(t *testing.T) {
		check(t, decode(t, must(post(t, srv.URL()+"/v1beta/models/gemini-x:generateContent", body))))
	})
	t.Run("stream sse", func(t *testing.T) {
		evs := parseSSE(t, must(post(t, srv.URL()+"/v1beta/models/gemini-x:streamGenerateContent?alt=sse", body)))
		if len(evs) != 1 {
			t.Fatalf("%d events, want 1", len(evs))
		}
		check(t, evs[0].data)
	})
	t.Run("stream array", func(t *testing.T) {
		var arr []object
		if err := json.Unmarshal(must(post(t, srv.URL()+"/v1/models/gemini-x:streamGenerateContent", body)), &arr); err != nil || len(arr) != 1 {
			t.Fatalf("array answer: %v (%d)", err, len(arr))
		}
		check(t, arr[0])
	})
	t.Run("countTokens", func(t *testing.T) {
		if m := decode(t, must(post(t, srv.URL()+"/v1beta/models/gemini-x:countTokens", body))); m["totalTokens"] == nil {
			t.Errorf("countTokens = %v", m)
		}
	})
	reqs := srv.Requests()
	if reqs[0].Model != "gemini-x" || reqs[0].Stream || !reqs[1].Stream {
		t.Errorf("logged model/stream: %+v %+v", reqs[0], reqs[1])
	}
}

func TestUnknownPathAndBadBody(t *testing.T) {
	srv := start(t, `{"conversations": []}`, Options{})
	if code, _, _ := post(t, srv.URL()+"/v1/elsewhere", object{}); code != 404 {
		t.Errorf("unknown path: status %d, want 404", code)
	}
	resp, err := http.Post(srv.URL()+"/v1/messages", "application/json", strings.NewReader("not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("bad body: status %d, want 400", resp.StatusCode)
	}
	resp, err = http.Get(srv.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /v1/models: status %d", resp.StatusCode)
	}
}

// must drops post's status and headers.
func must(_ int, _ http.Header, data []byte) []byte { return data }
