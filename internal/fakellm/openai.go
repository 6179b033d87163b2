package fakellm

import (
	"fmt"
	"net/http"
)

// renderResponses answers an OpenAI Responses request. A tool_use becomes a
// function_call item (with its namespace, as Codex's namespaced tools need);
// text becomes an assistant message item. The stream is response.created,
// then per item output_item.added, the text or arguments deltas and
// output_item.done, then response.completed with usage.
func renderResponses(w http.ResponseWriter, r reply, stream bool) {
	var items []object
	for i, b := range r.blocks {
		if b.Type == "tool_use" {
			it := object{"type": "function_call", "id": callID("fc_fake", r.seq, i), "call_id": callID("call_fake", r.seq, i),
				"name": b.Name, "arguments": string(input(b)), "status": "completed"}
			if b.Namespace != "" {
				it["namespace"] = b.Namespace
			}
			items = append(items, it)
		} else {
			items = append(items, object{"type": "message", "id": callID("msg_fake", r.seq, i), "role": "assistant", "status": "completed",
				"content": []any{object{"type": "output_text", "text": b.Text, "annotations": []any{}}}})
		}
	}
	model := r.model
	if model == "" {
		model = "fake-model"
	}
	output := []any{}
	for _, it := range items {
		output = append(output, it)
	}
	resp := object{"id": fmt.Sprintf("resp_fake%04d", r.seq), "object": "response", "created_at": now(),
		"status": "completed", "model": model, "output": output,
		"usage": object{"input_tokens": r.usage.InputTokens + r.usage.CacheReadTokens,
			"input_tokens_details":  object{"cached_tokens": r.usage.CacheReadTokens},
			"output_tokens":         r.usage.OutputTokens,
			"output_tokens_details": object{"reasoning_tokens": 0},
			"total_tokens":          r.usage.InputTokens + r.usage.CacheReadTokens + r.usage.OutputTokens}}
	if !stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	ev := startEvents(w)
	seq := 0
	send := func(e object) {
		e["sequence_number"] = seq
		seq++
		ev.send(e["type"].(string), e)
	}
	created := object{}
	for k, v := range resp {
		created[k] = v
	}
	created["status"], created["output"], created["usage"] = "in_progress", []any{}, nil
	send(object{"type": "response.created", "response": created})
	for i, it := range items {
		added := object{}
		for k, v := range it {
			added[k] = v
		}
		added["status"] = "in_progress"
		if it["type"] == "message" {
			added["content"] = []any{}
			send(object{"type": "response.output_item.added", "output_index": i, "item": added})
			text := r.blocks[i].Text
			part := object{"type": "output_text", "text": "", "annotations": []any{}}
			send(object{"type": "response.content_part.added", "output_index": i, "item_id": it["id"], "content_index": 0, "part": part})
			for _, d := range halves(text) {
				if d != "" {
					send(object{"type": "response.output_text.delta", "output_index": i, "item_id": it["id"], "content_index": 0, "delta": d})
				}
			}
			send(object{"type": "response.output_text.done", "output_index": i, "item_id": it["id"], "content_index": 0, "text": text})
			send(object{"type": "response.content_part.done", "output_index": i, "item_id": it["id"], "content_index": 0,
				"part": object{"type": "output_text", "text": text, "annotations": []any{}}})
		} else {
			added["arguments"] = ""
			send(object{"type": "response.output_item.added", "output_index": i, "item": added})
			args := it["arguments"].(string)
			for _, d := range halves(args) {
				send(object{"type": "response.function_call_arguments.delta", "output_index": i, "item_id": it["id"], "delta": d})
			}
			send(object{"type": "response.function_call_arguments.done", "output_index": i, "item_id": it["id"], "arguments": args})
		}
		send(object{"type": "response.output_item.done", "output_index": i, "item": it})
	}
	send(object{"type": "response.completed", "response": resp})
}

// renderChat answers a Chat Completions request: one message with the text
// and tool_calls, or a chunk stream ending in a finish_reason chunk with
// usage and [DONE].
func renderChat(w http.ResponseWriter, r reply, stream bool) {
	var text string
	var calls []object
	for i, b := range r.blocks {
		if b.Type == "tool_use" {
			calls = append(calls, object{"id": callID("call_fake", r.seq, i), "type": "function",
				"function": object{"name": b.Name, "arguments": string(input(b))}})
		} else {
			text += b.Text
		}
	}
	finish := "stop"
	if calls != nil {
		finish = "tool_calls"
	}
	model := r.model
	if model == "" {
		model = "fake-model"
	}
	id := fmt.Sprintf("chatcmpl-fake%04d", r.seq)
	usage := object{"prompt_tokens": r.usage.InputTokens, "completion_tokens": r.usage.OutputTokens,
		"total_tokens": r.usage.InputTokens + r.usage.OutputTokens}
	if !stream {
		msg := object{"role": "assistant", "content": nil}
		if text != "" {
			msg["content"] = text
		}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, object{"id": id, "object": "chat.completion", "created": now(), "model": model,
			"choices": []any{object{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	ev := startEvents(w)
	chunk := func(delta object, finish any, usage any) {
		c := object{"id": id, "object": "chat.completion.chunk", "created": now(), "model": model,
			"choices": []any{object{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
		}
		ev.send("", c)
	}
	chunk(object{"role": "assistant", "content": ""}, nil, nil)
	if text != "" {
		for _, d := range halves(text) {
			chunk(object{"content": d}, nil, nil)
		}
	}
	for i, c := range calls {
		fn := c["function"].(object)
		chunk(object{"tool_calls": []any{object{"index": i, "id": c["id"], "type": "function",
			"function": object{"name": fn["name"], "arguments": ""}}}}, nil, nil)
		chunk(object{"tool_calls": []any{object{"index": i, "function": object{"arguments": fn["arguments"]}}}}, nil, nil)
	}
	chunk(object{}, finish, usage)
	ev.send("", "[DONE]")
}
