package fakellm

import (
	"fmt"
	"net/http"
)

// renderGemini answers generateContent (one JSON response) and
// streamGenerateContent: with alt=sse as a single data event, without it as
// a JSON array of one response. A tool_use becomes a functionCall part.
func renderGemini(w http.ResponseWriter, r reply, stream, sse bool) {
	parts := []any{}
	for i, b := range r.blocks {
		if b.Type == "tool_use" {
			parts = append(parts, object{"functionCall": object{"name": b.Name, "args": input(b), "id": callID("call_fake", r.seq, i)}})
		} else {
			parts = append(parts, object{"text": b.Text})
		}
	}
	resp := object{
		"candidates": []any{object{"content": object{"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": object{"promptTokenCount": r.usage.InputTokens + r.usage.CacheReadTokens,
			"cachedContentTokenCount": r.usage.CacheReadTokens,
			"candidatesTokenCount":    r.usage.OutputTokens,
			"totalTokenCount":         r.usage.InputTokens + r.usage.CacheReadTokens + r.usage.OutputTokens},
		"modelVersion": r.model, "responseId": fmt.Sprintf("gemresp%04d", r.seq)}
	switch {
	case !stream:
		writeJSON(w, http.StatusOK, resp)
	case sse:
		startEvents(w).send("", resp)
	default:
		writeJSON(w, http.StatusOK, []any{resp})
	}
}
