package fakellm

import (
	"fmt"
	"net/http"
)

// renderAnthropic answers a Messages request, as one JSON message or as the
// event stream message_start, content_block_start/delta/stop per block,
// message_delta (stop reason, usage) and message_stop.
func renderAnthropic(w http.ResponseWriter, r reply, stream bool) {
	var content []any
	for i, b := range r.blocks {
		if b.Type == "tool_use" {
			content = append(content, object{"type": "tool_use", "id": callID("toolu_fake", r.seq, i), "name": b.Name, "input": input(b)})
		} else {
			content = append(content, object{"type": "text", "text": b.Text})
		}
	}
	stop := "end_turn"
	if r.hasToolUse() {
		stop = "tool_use"
	}
	model := r.model
	if model == "" {
		model = "claude-fake"
	}
	usage := object{"input_tokens": r.usage.InputTokens, "output_tokens": r.usage.OutputTokens,
		"cache_creation_input_tokens": r.usage.CacheCreationTokens, "cache_read_input_tokens": r.usage.CacheReadTokens}
	msg := object{"id": fmt.Sprintf("msg_fake%04d", r.seq), "type": "message", "role": "assistant",
		"model": model, "content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if content == nil {
		msg["content"] = []any{}
	}
	if !stream {
		writeJSON(w, http.StatusOK, msg)
		return
	}
	ev := startEvents(w)
	start := object{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	start["usage"] = object{"input_tokens": r.usage.InputTokens, "output_tokens": 1,
		"cache_creation_input_tokens": r.usage.CacheCreationTokens, "cache_read_input_tokens": r.usage.CacheReadTokens}
	ev.send("message_start", object{"type": "message_start", "message": start})
	ev.send("ping", object{"type": "ping"})
	for i, b := range r.blocks {
		if b.Type == "tool_use" {
			ev.send("content_block_start", object{"type": "content_block_start", "index": i,
				"content_block": object{"type": "tool_use", "id": callID("toolu_fake", r.seq, i), "name": b.Name, "input": object{}}})
			for _, part := range halves(string(input(b))) {
				ev.send("content_block_delta", object{"type": "content_block_delta", "index": i,
					"delta": object{"type": "input_json_delta", "partial_json": part}})
			}
		} else {
			ev.send("content_block_start", object{"type": "content_block_start", "index": i,
				"content_block": object{"type": "text", "text": ""}})
			for _, part := range halves(b.Text) {
				if part != "" {
					ev.send("content_block_delta", object{"type": "content_block_delta", "index": i,
						"delta": object{"type": "text_delta", "text": part}})
				}
			}
		}
		ev.send("content_block_stop", object{"type": "content_block_stop", "index": i})
	}
	ev.send("message_delta", object{"type": "message_delta",
		"delta": object{"stop_reason": stop, "stop_sequence": nil},
		"usage": object{"input_tokens": r.usage.InputTokens, "output_tokens": r.usage.OutputTokens,
			"cache_creation_input_tokens": r.usage.CacheCreationTokens, "cache_read_input_tokens": r.usage.CacheReadTokens}})
	ev.send("message_stop", object{"type": "message_stop"})
}
