package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// member is one key of a JSON object, its value kept as written, so that a
// person's settings come back in their order and with their values intact.
type member struct {
	Key   string
	Value json.RawMessage
}

// mergeHooks adds one hook group per binding to the "hooks" object of the
// JSON document old (empty: a new document). Groups an earlier install of
// aot wrote for this client (every command of theirs is `... hook CLIENT
// ...`) are dropped first, so installing twice changes nothing.
func mergeHooks(old []byte, aot, client string, bs []binding) ([]byte, error) {
	var top []member
	if len(bytes.TrimSpace(old)) > 0 {
		var err error
		if top, err = decodeObject(old); err != nil {
			return nil, fmt.Errorf("not a JSON object (%w); fix or move it, then install again", err)
		}
	}
	hi := index(top, "hooks")
	var events []member
	if hi >= 0 {
		var err error
		if events, err = decodeObject(top[hi].Value); err != nil {
			return nil, fmt.Errorf(`"hooks" is not a JSON object (%w)`, err)
		}
	}
	for _, b := range bs {
		ei := index(events, b.Event)
		var groups []json.RawMessage
		if ei >= 0 {
			if err := json.Unmarshal(events[ei].Value, &groups); err != nil {
				return nil, fmt.Errorf(`"hooks.%s" is not a list: %w`, b.Event, err)
			}
		}
		kept := groups[:0]
		for _, g := range groups {
			if !isOurs(g, client) {
				kept = append(kept, g)
			}
		}
		kept = append(kept, marshal(groupFor(aot, client, b)))
		value := marshal(kept)
		if ei >= 0 {
			events[ei].Value = value
		} else {
			events = append(events, member{Key: b.Event, Value: value})
		}
	}
	hooks := encodeObject(events)
	if hi >= 0 {
		top[hi].Value = hooks
	} else {
		top = append(top, member{Key: "hooks", Value: hooks})
	}
	return append(encodeObject(top), '\n'), nil
}

// isOurs reports whether a hook group holds only hooks of aot for client.
func isOurs(raw json.RawMessage, client string) bool {
	var g group
	if json.Unmarshal(raw, &g) != nil || len(g.Hooks) == 0 {
		return false
	}
	for _, h := range g.Hooks {
		if !strings.Contains(h.Command, " hook "+client+" ") {
			return false
		}
	}
	return true
}

func index(ms []member, key string) int {
	for i, m := range ms {
		if m.Key == key {
			return i
		}
	}
	return -1
}

// decodeObject reads a JSON object's members in their order.
func decodeObject(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("want an object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{Key: key, Value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return out, nil
}

// encodeObject writes members as an object indented by two spaces.
func encodeObject(ms []member) json.RawMessage {
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, m := range ms {
		if i > 0 {
			buf.WriteString(",")
		}
		key, _ := json.Marshal(m.Key)
		buf.WriteString("\n  ")
		buf.Write(key)
		buf.WriteString(": ")
		var v bytes.Buffer
		if err := json.Indent(&v, bytes.TrimSpace(m.Value), "  ", "  "); err != nil {
			buf.Write(m.Value) // already valid JSON, read by the decoder
		} else {
			buf.Write(v.Bytes())
		}
	}
	if len(ms) > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("}")
	return buf.Bytes()
}
