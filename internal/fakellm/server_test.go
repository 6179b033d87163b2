package fakellm

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// textAnswer is the concatenated text of an Anthropic JSON answer.
func textAnswer(t *testing.T, data []byte) string {
	t.Helper()
	var out string
	for _, c := range list(decode(t, data)["content"]) {
		out += str(obj(c)["text"])
	}
	return out
}

func TestMatching(t *testing.T) {
	srv := start(t, `{"conversations": [
	  {"match": "SUBTASK", "turns": [[{"type": "text", "text": "sub"}]]},
	  {"match": "do the thing", "require_tools": true, "turns": [[{"type": "text", "text": "main"}]]},
	  {"match": "", "system_contains": "Title writer", "turns": [[{"type": "text", "text": "title"}]]}
	], "default": [{"type": "text", "text": "fallback"}]}`, Options{})
	url := srv.URL() + "/v1/messages"
	noTools := func(b object) object { delete(b, "tools"); return b }
	withSystem := func(b object, s string) object { b["system"] = s; return b }

	for _, tc := range []struct {
		name string
		body object
		want string
	}{
		{"first user message", anthropicBody(false, msg("user", "please do the thing")), "main"},
		{"all user text before the first reply",
			anthropicBody(false, msg("user", "<env>"), msg("user", []any{object{"type": "text", "text": "do the thing"}})), "main"},
		{"role system inside messages is neither user text nor a reply",
			anthropicBody(false, msg("system", "SUBTASK"), msg("user", "do the thing")), "main"},
		{"first matching conversation wins", anthropicBody(false, msg("user", "SUBTASK: do the thing")), "sub"},
		{"require_tools skips a request without tools", noTools(anthropicBody(false, msg("user", "do the thing"))), "fallback"},
		{"system_contains", withSystem(noTools(anthropicBody(false, msg("user", "x"))), "You are a Title writer"), "title"},
		{"no match gets the default", anthropicBody(false, msg("user", "something else")), "fallback"},
		{"user text after a reply does not count",
			anthropicBody(false, msg("user", "hello"), msg("assistant", "hi"), msg("user", "do the thing")), "fallback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := textAnswer(t, must(post(t, url, tc.body))); got != tc.want {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDefaultWithoutScriptDefault(t *testing.T) {
	srv := start(t, `{"conversations": []}`, Options{})
	if got := textAnswer(t, must(post(t, srv.URL()+"/v1/messages", anthropicBody(false, msg("user", "hi"))))); got != "ok" {
		t.Errorf("answer %q, want ok", got)
	}
}

func TestTurnCounting(t *testing.T) {
	srv := start(t, `{"conversations": [{"match": "go", "turns": [
	  [{"type": "text", "text": "t0"}], [{"type": "text", "text": "t1"}], [{"type": "text", "text": "t2"}]
	]}]}`, Options{})
	tr := object{"type": "tool_result", "tool_use_id": "a", "content": "out"}
	for _, tc := range []struct {
		name string
		msgs []any
		want string
	}{
		{"no reply yet", []any{msg("user", "go")}, "t0"},
		{"one reply", []any{msg("user", "go"), msg("assistant", "x"), msg("user", []any{tr})}, "t1"},
		{"consecutive assistant messages are one reply",
			[]any{msg("user", "go"), msg("assistant", "x"), msg("assistant", "y"), msg("user", []any{tr})}, "t1"},
		{"a system message does not split a reply",
			[]any{msg("user", "go"), msg("assistant", "x"), msg("system", "note"), msg("assistant", "y"), msg("user", "z")}, "t1"},
		{"two replies", []any{msg("user", "go"), msg("assistant", "x"), msg("user", "a"), msg("assistant", "y"), msg("user", "b")}, "t2"},
		{"past the script",
			[]any{msg("user", "go"), msg("assistant", "1"), msg("user", "a"), msg("assistant", "2"), msg("user", "b"), msg("assistant", "3"), msg("user", "c")},
			"(script exhausted)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := textAnswer(t, must(post(t, srv.URL()+"/v1/messages", anthropicBody(false, tc.msgs...)))); got != tc.want {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("gemini", func(t *testing.T) {
		body := geminiBody(content("user", "go"), content("model", "x"),
			object{"role": "user", "parts": []any{object{"functionResponse": object{"name": "f", "response": object{"output": "o"}}}}})
		m := decode(t, must(post(t, srv.URL()+"/v1beta/models/g:generateContent", body)))
		if got := field(m, "candidates", 0, "content", "parts", 0, "text"); got != "t1" {
			t.Errorf("answer %v, want t1", got)
		}
	})
}

func TestTemplates(t *testing.T) {
	srv := start(t, `{"conversations": [{"match": "go", "turns": [
	  [{"type": "tool_use", "name": "spawn_agent", "input": {}}],
	  [{"type": "tool_use", "name": "wait_agent", "input": {
	     "targets": ["{{re:\"agent_id\":\\s*\"([^\"]+)\"}}"],
	     "note": "agent {{re:nickname\":\"(\\w+)}} ok",
	     "missing": "{{re:nothing-(\\d+)}}"}}]
	]}]}`, Options{})
	body := responsesBody(false, item("user", "go"),
		object{"type": "function_call", "name": "spawn_agent", "call_id": "c1", "arguments": "{}"},
		object{"type": "function_call_output", "call_id": "c1", "output": `{"agent_id": "019a-77", "nickname":"Ada"}`})
	m := decode(t, must(post(t, srv.URL()+"/v1/responses", body)))
	var args object
	if err := json.Unmarshal([]byte(str(field(m, "output", 0, "arguments"))), &args); err != nil {
		t.Fatal(err)
	}
	want := object{"targets": []any{"019a-77"}, "note": "agent Ada ok", "missing": ""}
	if diff := cmp.Diff(want, args); diff != "" {
		t.Errorf("filled input (-want +got):\n%s", diff)
	}
}

func TestFinal(t *testing.T) {
	srv := start(t, `{"conversations": [{"match": "go", "turns": [[{"type": "final", "json": {"status": "done", "n": 2}}]]}]}`, Options{})
	body := anthropicBody(false, msg("user", "go"))
	if got := textAnswer(t, must(post(t, srv.URL()+"/v1/messages", body))); got != `{"status":"done","n":2}` {
		t.Errorf("without StructuredOutput: %q", got)
	}
	body["tools"] = append(list(body["tools"]), object{"name": "StructuredOutput"})
	m := decode(t, must(post(t, srv.URL()+"/v1/messages", body)))
	if field(m, "content", 0, "name") != "StructuredOutput" || field(m, "content", 0, "input", "status") != "done" {
		t.Errorf("with StructuredOutput: %v", m["content"])
	}
}

func TestSchemaAnswers(t *testing.T) {
	// The Gemini router and next-speaker check demand schema JSON; a
	// non-JSON answer makes Gemini CLI retry until it times out.
	srv := start(t, `{"conversations": [{"match": "do", "turns": [[{"type": "text", "text": "not json"}]]}]}`, Options{})
	router := geminiBody(content("user", "do the thing"))
	delete(router, "tools")
	router["systemInstruction"] = object{"parts": []any{object{"text": "You are a specialized Task Routing AI."}}}
	router["generationConfig"] = object{"responseMimeType": "application/json", "responseJsonSchema": object{
		"type": "OBJECT", "required": []any{"complexity_reasoning", "complexity_score"},
		"properties": object{"complexity_reasoning": object{"type": "STRING"}, "complexity_score": object{"type": "INTEGER"}}}}
	m := decode(t, must(post(t, srv.URL()+"/v1beta/models/flash-lite:generateContent", router)))
	got := decode(t, []byte(str(field(m, "candidates", 0, "content", "parts", 0, "text"))))
	if got["complexity_score"] == nil || got["complexity_reasoning"] == nil {
		t.Errorf("router answer %v", got)
	}

	next := geminiBody(content("user", "do the thing"), content("model", "done"), content("user", "who speaks next?"))
	next["generationConfig"] = object{"responseJsonSchema": object{"type": "object",
		"properties": object{"reasoning": object{"type": "string"}, "next_speaker": object{"type": "string", "enum": []any{"user", "model"}}}}}
	m = decode(t, must(post(t, srv.URL()+"/v1beta/models/flash:generateContent", next)))
	got = decode(t, []byte(str(field(m, "candidates", 0, "content", "parts", 0, "text"))))
	if diff := cmp.Diff(object{"reasoning": "fake", "next_speaker": "user"}, got); diff != "" {
		t.Errorf("next speaker answer (-want +got):\n%s", diff)
	}
	if reqs := srv.Requests(); reqs[0].Reply != "schema" || reqs[1].Reply != "schema" {
		t.Errorf("replies logged as %q, %q", reqs[0].Reply, reqs[1].Reply)
	}
}

func TestErrorTimes(t *testing.T) {
	// Two 429s, then the reply; then turn 1 is a persistent 529.
	srv := start(t, `{"conversations": [{"match": "go", "turns": [
	  {"type": "error", "status": 429, "retry_after": "2", "times": 2},
	  [{"type": "text", "text": "recovered"}],
	  {"type": "error", "status": 529}
	]}]}`, Options{})
	url := srv.URL() + "/v1/messages"
	turn0 := anthropicBody(false, msg("user", "go"))
	for i := range 2 {
		code, h, data := post(t, url, turn0)
		if code != 429 || h.Get("Retry-After") != "2" || field(decode(t, data), "error", "type") != "rate_limit_error" {
			t.Fatalf("attempt %d: %d %q %s", i, code, h.Get("Retry-After"), data)
		}
	}
	if code, _, data := post(t, url, turn0); code != 200 || textAnswer(t, data) != "recovered" {
		t.Fatalf("third attempt: %d %s", code, data)
	}
	turn1 := anthropicBody(false, msg("user", "go"), msg("assistant", "recovered"), msg("user", "more"))
	for range 3 {
		code, _, data := post(t, url, turn1)
		if code != 529 || field(decode(t, data), "error", "type") != "overloaded_error" {
			t.Fatalf("turn 1: %d %s", code, data)
		}
	}
	var got []string
	for _, r := range srv.Requests() {
		got = append(got, r.Reply)
	}
	want := []string{"conv0/turn0/error", "conv0/turn0/error", "conv0/turn0", "conv0/turn1/error", "conv0/turn1/error", "conv0/turn1/error"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
}

func TestErrorShapes(t *testing.T) {
	script := func(e string) string {
		return `{"conversations": [{"match": "", "turns": [` + e + `]}]}`
	}
	for _, tc := range []struct {
		name, turn, path string
		body             object
		status           int
		want             []any // a path into the answer, then the value
	}{
		{"anthropic 500", `{"type": "error", "status": 500}`, "/v1/messages", anthropicBody(true, msg("user", "x")), 500, []any{"error", "type", "api_error"}},
		{"anthropic usage limit", `{"type": "error", "kind": "usage_limit"}`, "/v1/messages", anthropicBody(false, msg("user", "x")), 429, []any{"error", "type", "rate_limit_error"}},
		{"responses 429", `{"type": "error"}`, "/v1/responses", responsesBody(true, item("user", "x")), 429, []any{"error", "code", "rate_limit_exceeded"}},
		{"responses usage limit", `{"type": "error", "kind": "usage_limit"}`, "/v1/responses", responsesBody(true, item("user", "x")), 429, []any{"error", "type", "usage_limit_reached"}},
		{"chat usage limit", `{"type": "error", "kind": "usage_limit"}`, "/v1/chat/completions", object{"messages": []any{msg("user", "x")}}, 429, []any{"error", "code", "insufficient_quota"}},
		{"gemini 503", `{"type": "error", "status": 503}`, "/v1beta/models/g:generateContent", geminiBody(content("user", "x")), 503, []any{"error", "status", "UNAVAILABLE"}},
		{"gemini usage limit", `{"type": "error", "kind": "usage_limit"}`, "/v1beta/models/g:streamGenerateContent", geminiBody(content("user", "x")), 429, []any{"error", "details", 0, "violations", 0, "quotaId", "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}},
		{"custom body", `{"type": "error", "status": 500, "body": {"oops": true}}`, "/v1/messages", anthropicBody(false, msg("user", "x")), 500, []any{"oops", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t, script(tc.turn), Options{})
			code, _, data := post(t, srv.URL()+tc.path, tc.body)
			if code != tc.status {
				t.Errorf("status %d, want %d", code, tc.status)
			}
			path, want := tc.want[:len(tc.want)-1], tc.want[len(tc.want)-1]
			if got := field(decode(t, data), path...); got != want {
				t.Errorf("%v = %v, want %v in %s", path, got, want, data)
			}
			if r := srv.Requests()[0]; r.Status != tc.status || !strings.HasSuffix(r.Reply, "/error") {
				t.Errorf("logged %d %q", r.Status, r.Reply)
			}
		})
	}
}

func TestDelay(t *testing.T) {
	srv := start(t, `{"conversations": [{"match": "slow", "turns": [{"blocks": [{"type": "text", "text": "late"}], "delay_ms": 60000}]},
	  {"match": "quick", "turns": [{"blocks": [{"type": "text", "text": "soon"}], "delay_ms": 20}]}]}`, Options{})
	began := time.Now()
	if got := textAnswer(t, must(post(t, srv.URL()+"/v1/messages", anthropicBody(false, msg("user", "quick"))))); got != "soon" || time.Since(began) < 20*time.Millisecond {
		t.Errorf("quick: %q after %v", got, time.Since(began))
	}

	// A hung answer ends when the client gives up, and Close does not wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	data, _ := json.Marshal(anthropicBody(false, msg("user", "slow")))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(string(data)))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("hung request answered")
	}
	go http.Post(srv.URL()+"/v1/messages", "application/json", strings.NewReader(string(data)))
	for len(srv.Requests()) < 3 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error)
	go func() { closed <- srv.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a delayed answer")
	}
}

func TestLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	srv := start(t, toolThenText, Options{LogPath: path})
	post(t, srv.URL()+"/v1/messages?beta=true", anthropicBody(true, msg("user", "do the thing")), "X-Api-Key", "sk-secret-1")
	post(t, srv.URL()+"/v1/responses", responsesBody(true, item("user", "nothing")), "Authorization", "Bearer sk-secret-2")
	post(t, srv.URL()+"/v1beta/models/g:generateContent", geminiBody(content("user", "x")), "X-Goog-Api-Key", "sk-secret-3")
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "sk-secret") {
		t.Errorf("log holds a key:\n%s", data)
	}
	var lines []Request
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r Request
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log line %s: %v", sc.Bytes(), err)
		}
		lines = append(lines, r)
	}
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3", len(lines))
	}
	first := lines[0]
	want := Request{Seq: 1, Method: "POST", Path: "/v1/messages", Query: "beta=true", Protocol: Anthropic,
		BodyKeys: []string{"max_tokens", "messages", "model", "stream", "system", "tools"}, Model: "claude-test",
		Stream: true, Tools: []string{"Bash", "Write"}, Turn: 0, Conversation: 0, Reply: "conv0/turn0", Status: 200,
		Blocks: []Block{{Type: "text", Text: "I'll run it — now."},
			{Type: "tool_use", Name: "Bash", Namespace: "ns1", Input: json.RawMessage(`{"command":"echo hi > out.txt"}`)}},
		FirstUser: "do the thing\n", Tail: "do the thing"}
	opts := cmp.Options{cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".Time" || p.Last().String() == ".Header"
	}, cmp.Ignore())}
	if diff := cmp.Diff(want, first, opts); diff != "" {
		t.Errorf("first line (-want +got):\n%s", diff)
	}
	for i, h := range []string{first.Header["x-api-key"], lines[1].Header["authorization"], lines[2].Header["x-goog-api-key"]} {
		if h != "[redacted]" && h != "Bearer [redacted]" {
			t.Errorf("line %d key header logged as %q", i, h)
		}
	}
	if lines[1].Reply != "default" || lines[1].Conversation != -1 {
		t.Errorf("unmatched request logged as %q, conversation %d", lines[1].Reply, lines[1].Conversation)
	}
	if got := srv.Requests()[0].Body; !strings.Contains(string(got), `"do the thing"`) {
		t.Errorf("Requests()[0].Body = %s", got)
	}
}
