package cli

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// jsonWriter writes indented JSON by hand for the one document that grows
// with the state (aot state --json): encoding/json marshals, then re-scans
// to indent, then re-scans custom marshalers, which at 100,000 atoms costs
// more than reading the file.
type jsonWriter struct {
	w     io.Writer
	buf   []byte // written to w whenever it holds a chunk
	err   error
	depth int
	first []bool // per open container: no member written yet
}

// jsonChunk is how much the writer gathers before each write to w.
const jsonChunk = 64 << 10

// indent holds the spaces of a new line at any depth up to its length / 2.
const indent = "                                "

func newJSONWriter(w io.Writer) *jsonWriter {
	return &jsonWriter{w: w, buf: make([]byte, 0, jsonChunk+4<<10)}
}

// flush writes the gathered chunk once it is full (all: whatever there is).
func (j *jsonWriter) flush(all bool) {
	if len(j.buf) < jsonChunk && !all || j.err != nil {
		return
	}
	_, j.err = j.w.Write(j.buf)
	j.buf = j.buf[:0]
}

func (j *jsonWriter) newline() {
	j.flush(false)
	j.buf = append(j.buf, '\n')
	for n := 2 * j.depth; n > 0; n -= len(indent) {
		j.buf = append(j.buf, indent[:min(n, len(indent))]...)
	}
}

// sep starts a member or element: a comma after the first, a new line.
func (j *jsonWriter) sep() {
	if n := len(j.first); n > 0 {
		if !j.first[n-1] {
			j.buf = append(j.buf, ',')
		}
		j.first[n-1] = false
		j.newline()
	}
}

func (j *jsonWriter) open(c byte) {
	j.buf = append(j.buf, c)
	j.depth++
	j.first = append(j.first, true)
}

func (j *jsonWriter) close(c byte) {
	empty := j.first[len(j.first)-1]
	j.first = j.first[:len(j.first)-1]
	j.depth--
	if !empty {
		j.newline()
	}
	j.buf = append(j.buf, c)
}

func (j *jsonWriter) key(k string) {
	j.sep()
	j.str(k)
	j.buf = append(j.buf, ": "...)
}

func (j *jsonWriter) str(s string) { j.buf = appendJSONString(j.buf, s) }

func (j *jsonWriter) strings(list []string) {
	j.open('[')
	for _, s := range list {
		j.sep()
		j.str(s)
	}
	j.close(']')
}

func (j *jsonWriter) int(n int) { j.buf = strconv.AppendInt(j.buf, int64(n), 10) }

func (j *jsonWriter) bool(b bool) { j.buf = strconv.AppendBool(j.buf, b) }

func (j *jsonWriter) strPtr(s *string) {
	if s == nil {
		j.buf = append(j.buf, "null"...)
		return
	}
	j.str(*s)
}

func (j *jsonWriter) end() error {
	j.buf = append(j.buf, '\n')
	j.flush(true)
	return j.err
}

// appendJSONString appends s as a JSON string the way encoding/json does
// with HTML escaping off: invalid UTF-8 becomes U+FFFD, control characters
// and U+2028/U+2029 are escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// writeStateJSON writes doc exactly as writeJSON would.
func writeStateJSON(w io.Writer, doc stateDoc) error {
	j := newJSONWriter(w)
	j.open('{')
	j.key("exists")
	j.bool(doc.Exists)
	j.key("status")
	j.str(doc.Status)
	j.key("iteration")
	j.int(doc.Iteration)
	j.key("stall_count")
	j.int(doc.StallCount)
	j.key("prev_pending_count")
	j.int(doc.PrevPendingCount)
	j.key("stop_requested")
	j.bool(doc.StopRequested)
	j.key("redirect_requested")
	j.bool(doc.RedirectRequested)
	j.key("stop_reason")
	j.strPtr(doc.StopReason)
	j.key("atoms")
	j.open('[')
	for _, a := range doc.Atoms {
		j.sep()
		j.open('{')
		j.key("id")
		j.str(a.ID)
		j.key("description")
		j.str(a.Description)
		j.key("status")
		j.str(a.Status)
		j.key("depends_on")
		j.strings(a.DependsOn)
		if a.ORGroup != "" {
			j.key("or_group")
			j.str(a.ORGroup)
		}
		if a.Failed {
			j.key("failed")
			j.bool(true)
		}
		j.close('}')
	}
	j.close(']')
	j.key("executable_atoms")
	j.strings(doc.ExecutableAtoms)
	j.key("bindings")
	j.open('{')
	for _, b := range doc.Bindings {
		j.key(b.AtomID)
		j.open('{')
		j.key("summary")
		j.str(b.Summary)
		j.key("artifacts")
		arts := b.Artifacts
		if arts == nil {
			arts = []string{}
		}
		j.strings(arts)
		j.close('}')
	}
	j.close('}')
	j.key("summary")
	j.open('{')
	for _, f := range []struct {
		k string
		v int
	}{{"total", doc.Summary.Total}, {"pending", doc.Summary.Pending}, {"in_progress", doc.Summary.InProgress}, {"resolved", doc.Summary.Resolved}, {"failed", doc.Summary.Failed}, {"executable", doc.Summary.Executable}} {
		j.key(f.k)
		j.int(f.v)
	}
	j.close('}')
	j.close('}')
	return j.end()
}
