package fakellm

import (
	"encoding/json"
	"strings"
)

// fillSchema makes a small JSON value that satisfies the common parts of a
// JSON schema (or Gemini's upper-case variant of one): objects get every
// property, strings their first enum value or "fake", numbers their minimum
// or 1. Gemini's router classifier gets a fixed, plausible answer.
func fillSchema(schema object) json.RawMessage {
	props := obj(schema["properties"])
	if props["complexity_score"] != nil && props["complexity_reasoning"] != nil {
		return json.RawMessage(`{"complexity_reasoning":"fake llm: simple task","complexity_score":10}`)
	}
	data, err := json.Marshal(sample(schema, 0))
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return data
}

func sample(schema object, depth int) any {
	if enum := list(schema["enum"]); len(enum) > 0 {
		return enum[0]
	}
	if c, ok := schema["const"]; ok {
		return c
	}
	typ := schema["type"]
	if l := list(typ); len(l) > 0 {
		typ = l[0]
	}
	if typ == nil {
		for _, k := range []string{"anyOf", "oneOf"} {
			if alts := list(schema[k]); len(alts) > 0 {
				return sample(obj(alts[0]), depth+1)
			}
		}
		if schema["properties"] != nil {
			typ = "object"
		}
	}
	switch strings.ToLower(str(typ)) {
	case "string":
		return "fake"
	case "integer", "number":
		if m, ok := schema["minimum"].(float64); ok {
			return m
		}
		return 1
	case "boolean":
		return false
	case "array":
		if depth > 8 {
			return []any{}
		}
		if min, ok := schema["minItems"].(float64); ok && min > 0 {
			return []any{sample(obj(schema["items"]), depth+1)}
		}
		return []any{}
	case "null":
		return nil
	}
	out := object{}
	if depth > 8 {
		return out
	}
	for k, v := range obj(schema["properties"]) {
		out[k] = sample(obj(v), depth+1)
	}
	return out
}
