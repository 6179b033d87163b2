package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// start runs a server for the script text and closes it with the test.
func start(t *testing.T, script string, opts Options) *Server {
	t.Helper()
	s, err := ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// post sends body as JSON and returns the status, headers and raw answer.
func post(t *testing.T, url string, body any, header ...string) (int, http.Header, []byte) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

type event struct {
	name string
	data object
	raw  string
}

// parseSSE splits an event stream into its events.
func parseSSE(t *testing.T, data []byte) []event {
	t.Helper()
	var evs []event
	var cur event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.raw != "" {
				evs = append(evs, cur)
			}
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.raw = strings.TrimPrefix(line, "data: ")
			if cur.raw != "[DONE]" {
				if err := json.Unmarshal([]byte(cur.raw), &cur.data); err != nil {
					t.Fatalf("event data %q: %v", cur.raw, err)
				}
			}
		}
	}
	return evs
}

func decode(t *testing.T, data []byte) object {
	t.Helper()
	var o object
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatalf("answer %q: %v", data, err)
	}
	return o
}

// field walks a decoded JSON value by keys and list indexes.
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = obj(v)[k]
		case int:
			l := list(v)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// Request bodies as the clients send them.

func anthropicBody(stream bool, msgs ...any) object {
	return object{"model": "claude-test", "stream": stream, "max_tokens": 100,
		"system":   []any{object{"type": "text", "text": "You are Claude Code."}},
		"tools":    []any{object{"name": "Bash", "input_schema": object{}}, object{"name": "Write"}},
		"messages": msgs}
}

func msg(role string, content any) object { return object{"role": role, "content": content} }

func responsesBody(stream bool, items ...any) object {
	return object{"model": "fake-model", "stream": stream, "store": false,
		"tools": []any{object{"type": "function", "name": "exec_command"}, object{"type": "namespace", "name": "multi_agent_v1"}},
		"input": items}
}

func item(role, text string) object {
	return object{"type": "message", "role": role, "content": []any{object{"type": "input_text", "text": text}}}
}

func geminiBody(contents ...any) object {
	return object{"contents": contents,
		"systemInstruction": object{"parts": []any{object{"text": "You are Gemini CLI."}}},
		"tools":             []any{object{"functionDeclarations": []any{object{"name": "run_shell_command"}}}}}
}

func content(role, text string) object {
	return object{"role": role, "parts": []any{object{"text": text}}}
}
