package fakellm

import (
	"encoding/json"
	"strings"
)

// The four wire protocols the server speaks.
const (
	Anthropic = "anthropic" // Anthropic Messages
	Responses = "responses" // OpenAI Responses
	Chat      = "chat"      // OpenAI Chat Completions
	Gemini    = "gemini"    // Gemini generateContent
)

// exchange is what the server needs from a request body, whatever the
// protocol: how to pick a reply and how to log it.
type exchange struct {
	firstUser string // user text before the first model reply
	system    string
	turn      int // model replies already in the history
	tools     []string
	tail      string         // what the client sent after the last model reply
	schema    map[string]any // a JSON schema the answer must follow, if any
}

type object = map[string]any

// textOf flattens any protocol's content value to text.
func textOf(v any) string {
	switch c := v.(type) {
	case nil:
		return ""
	case string:
		return c
	case object:
		return textOf([]any{c})
	case []any:
		var out []string
		for _, item := range c {
			switch b := item.(type) {
			case string:
				out = append(out, b)
			case object:
				if t, ok := b["text"].(string); ok {
					out = append(out, t)
				} else if b["type"] == "tool_result" {
					out = append(out, textOf(b["content"]))
				} else if fr, ok := b["functionResponse"]; ok {
					js, _ := json.Marshal(fr)
					out = append(out, string(js))
				}
			}
		}
		return strings.Join(out, "\n")
	}
	return ""
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func obj(v any) object {
	o, _ := v.(object)
	return o
}

// anthropicExchange reads a Messages body. Messages with role "system"
// (Claude Code sends them mid-conversation) are neither user text nor a
// model reply.
func anthropicExchange(body object) exchange {
	msgs := list(body["messages"])
	var x exchange
	x.firstUser, x.turn = userTextAndTurns(msgs, "content", "assistant")
	x.tail = tailText(msgs, func(m object) bool { return m["role"] == "assistant" }, func(m object) string { return textOf(m["content"]) })
	for _, t := range list(body["tools"]) {
		x.tools = append(x.tools, str(obj(t)["name"]))
	}
	x.system = textOf(body["system"])
	if f := obj(obj(body["output_config"])["format"]); f["type"] == "json_schema" {
		x.schema = obj(f["schema"])
	}
	return x
}

// userTextAndTurns concatenates user text before the first model reply and
// counts the model replies: runs of consecutive model entries, where only
// user and model entries break or extend a run.
// An entry without a role is a user entry (Gemini allows that).
func userTextAndTurns(entries []any, contentKey, modelRole string) (string, int) {
	var first strings.Builder
	turns, prev := 0, ""
	for _, e := range entries {
		m := obj(e)
		role := str(m["role"])
		if role == "" {
			role = "user"
		}
		switch role {
		case "user":
			if turns == 0 {
				first.WriteString(textOf(m[contentKey]))
				first.WriteString("\n")
			}
			prev = role
		case modelRole:
			if prev != modelRole {
				turns++
			}
			prev = role
		}
	}
	return first.String(), turns
}

// tailText joins the text of the entries after the last model entry.
func tailText(entries []any, isModel func(object) bool, text func(object) string) string {
	var parts []string
	for i := len(entries) - 1; i >= 0; i-- {
		m := obj(entries[i])
		if isModel(m) {
			break
		}
		parts = append(parts, text(m))
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "\n")
}

// responsesModelItems are Responses input items the model produced.
var responsesModelItems = map[string]bool{
	"function_call": true, "reasoning": true, "custom_tool_call": true,
	"local_shell_call": true, "web_search_call": true,
}

func responsesIsModel(it object) bool {
	typ := str(it["type"])
	if typ == "" {
		typ = "message"
	}
	return (typ == "message" && it["role"] == "assistant") || responsesModelItems[typ]
}

// responsesExchange reads a Responses body. The system prompt is the
// instructions plus any system or developer items (Codex sends the latter).
func responsesExchange(body object) exchange {
	var items []any
	switch in := body["input"].(type) {
	case string:
		items = []any{object{"type": "message", "role": "user", "content": in}}
	case []any:
		items = in
	}
	var x exchange
	var first strings.Builder
	system := []string{str(body["instructions"])}
	inModel := false
	for _, e := range items {
		it := obj(e)
		typ, role := str(it["type"]), str(it["role"])
		if typ == "" {
			typ = "message"
		}
		model := responsesIsModel(it)
		if typ == "message" && role == "user" && x.turn == 0 {
			first.WriteString(textOf(it["content"]))
			first.WriteString("\n")
		}
		if typ == "message" && (role == "system" || role == "developer") {
			system = append(system, textOf(it["content"]))
		}
		switch {
		case model:
			if !inModel {
				x.turn++
			}
			inModel = true
		case typ == "message" && role != "assistant", strings.HasSuffix(typ, "_output"):
			inModel = false
		}
	}
	x.firstUser = first.String()
	x.system = strings.Join(system, "\n")
	x.tail = tailText(items, responsesIsModel, func(it object) string {
		switch o := it["output"].(type) {
		case string:
			return o
		case nil:
			return textOf(it["content"])
		default:
			return textOf(o)
		}
	})
	for _, t := range list(body["tools"]) {
		to := obj(t)
		name := str(to["name"])
		if name == "" {
			name = str(to["type"])
		}
		x.tools = append(x.tools, name)
	}
	if f := obj(obj(body["text"])["format"]); f["type"] == "json_schema" {
		x.schema = obj(f["schema"])
	}
	return x
}

func chatExchange(body object) exchange {
	msgs := list(body["messages"])
	var x exchange
	x.firstUser, x.turn = userTextAndTurns(msgs, "content", "assistant")
	x.tail = tailText(msgs, func(m object) bool { return m["role"] == "assistant" }, func(m object) string { return textOf(m["content"]) })
	var system []string
	for _, m := range msgs {
		if r := obj(m)["role"]; r == "system" || r == "developer" {
			system = append(system, textOf(obj(m)["content"]))
		}
	}
	x.system = strings.Join(system, "\n")
	for _, t := range list(body["tools"]) {
		x.tools = append(x.tools, str(obj(obj(t)["function"])["name"]))
	}
	if rf := obj(body["response_format"]); rf["type"] == "json_schema" {
		x.schema = obj(obj(rf["json_schema"])["schema"])
		if x.schema == nil {
			x.schema = object{}
		}
	}
	return x
}

func geminiExchange(body object) exchange {
	contents := list(body["contents"])
	var x exchange
	x.firstUser, x.turn = userTextAndTurns(contents, "parts", "model")
	x.tail = tailText(contents, func(c object) bool { return c["role"] == "model" }, func(c object) string { return textOf(c["parts"]) })
	si := body["systemInstruction"]
	if si == nil {
		si = body["system_instruction"]
	}
	if o, ok := si.(object); ok {
		x.system = textOf(o["parts"])
	} else {
		x.system = textOf(si)
	}
	for _, t := range list(body["tools"]) {
		decls := list(obj(t)["functionDeclarations"])
		if decls == nil {
			decls = list(obj(t)["function_declarations"])
		}
		for _, d := range decls {
			x.tools = append(x.tools, str(obj(d)["name"]))
		}
	}
	gc := obj(body["generationConfig"])
	for _, k := range []string{"responseJsonSchema", "responseSchema", "response_json_schema", "response_schema"} {
		if s := obj(gc[k]); s != nil {
			x.schema = s
			break
		}
	}
	if x.schema == nil && gc["responseMimeType"] == "application/json" {
		x.schema = object{}
	}
	return x
}
