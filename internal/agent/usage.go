package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// UsageFileEnv names the environment variable that carries the path of the
// attempt's usage file. An agent may append one JSON line per model call:
//
//	{"input_tokens":N,"output_tokens":N,"cost_usd":X}
//
// The lines are summed once the attempt is over, however it ended, so a
// crashed or killed attempt is still paid for. When the file holds at least
// one valid line the sum is the attempt's usage and the answer's own "usage"
// is ignored; otherwise the answer's "usage" counts.
const UsageFileEnv = "AOT_USAGE_FILE"

// maxUsageLine bounds one line of the usage file; longer lines are invalid.
const maxUsageLine = 64 << 10

// sumUsage adds up the lines of a usage file. A line counts when it is one
// JSON object with at least one of the three fields; each field is taken or
// refused on its own (see parseUsage), and every refusal is noted in
// Refused with its line. Torn, invalid or oversized lines are skipped.
// Known is true when at least one field was taken.
func sumUsage(r io.Reader) Usage {
	var u Usage
	br := bufio.NewReaderSize(r, 4096)
	var line []byte
	n := 0 // the number of the line being read
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) > maxUsageLine {
				line = line[:0]
				n++
				// Skip the rest of this line.
				for err == bufio.ErrBufferFull {
					_, err = br.ReadSlice('\n')
				}
				if err != nil {
					return u
				}
			}
			continue
		}
		n++
		if l, ok := parseUsageLine(line); ok && len(line) <= maxUsageLine {
			for _, why := range strings.Split(l.Refused, "; ") {
				if why != "" {
					u.refuse(fmt.Sprintf("usage file line %d: %s", n, why))
				}
			}
			l.Refused = ""
			u = u.Plus(l)
		}
		line = line[:0]
		if err != nil {
			return u
		}
	}
}

func parseUsageLine(b []byte) (Usage, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return Usage{}, false
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return Usage{}, false
	}
	return parseUsage(raw)
}

// parseUsage reads the three usage fields of a decoded object, each on its
// own: a field that is not a number, is negative, is not finite or (tokens)
// is not whole is refused and noted in Refused, and the others still count;
// a token count past the largest int64 counts as that, which is over every
// budget. Known says at least one field was taken; present that at least
// one of the three was there.
func parseUsage(raw map[string]json.RawMessage) (u Usage, present bool) {
	tokens := func(name string, dst *int64) {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			return
		}
		present = true
		f, why := number(v)
		switch {
		case why == "" && f != math.Trunc(f):
			why = "is not a whole number"
		case why == "" && f >= math.MaxInt64:
			*dst = math.MaxInt64
			u.Known = true
			u.refuse(fmt.Sprintf("%s %s is past the largest count, counted as %d", name, clip(v), int64(math.MaxInt64)))
			return
		}
		if why != "" {
			u.refuse(fmt.Sprintf("%s %s %s, not counted", name, clip(v), why))
			return
		}
		*dst = int64(f)
		u.Known = true
	}
	tokens("input_tokens", &u.InputTokens)
	tokens("output_tokens", &u.OutputTokens)
	if v, ok := raw["cost_usd"]; ok && string(v) != "null" {
		present = true
		if f, why := number(v); why != "" {
			u.refuse(fmt.Sprintf("cost_usd %s %s, not counted", clip(v), why))
		} else {
			u.CostUSD = f
			u.Known = true
		}
	}
	return u, present
}

// number reads a JSON number that may be used as usage: finite and not
// negative. why says what is wrong with it otherwise.
func number(v json.RawMessage) (float64, string) {
	var n json.Number
	if json.Unmarshal(v, &n) != nil {
		return 0, "is not a number"
	}
	f, err := strconv.ParseFloat(string(n), 64)
	switch {
	case err != nil || math.IsInf(f, 0) || math.IsNaN(f):
		return 0, "is not a finite number"
	case f < 0:
		return 0, "is negative"
	}
	return f, ""
}

// clip keeps a refused value short in a notice.
func clip(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}

// Plus is u and v added with saturating arithmetic: a token total stops at
// the largest int64 and a cost at the largest float64, never wraps or
// becomes infinite, so a total at the maximum is over every budget. Negative
// or non-finite parts of v are not added. Known and the notes of both are
// kept.
func (u Usage) Plus(v Usage) Usage {
	u.InputTokens = AddCount(u.InputTokens, v.InputTokens)
	u.OutputTokens = AddCount(u.OutputTokens, v.OutputTokens)
	u.CostUSD = AddCost(u.CostUSD, v.CostUSD)
	u.Known = u.Known || v.Known
	u.refuse(v.Refused)
	return u
}

// refuse adds a note to Refused.
func (u *Usage) refuse(note string) {
	switch {
	case note == "":
	case u.Refused == "":
		u.Refused = note
	default:
		u.Refused += "; " + note
	}
}

// Tokens is the attempt's input and output tokens together, saturating.
func (u Usage) Tokens() int64 { return AddCount(u.InputTokens, u.OutputTokens) }

// AddCount adds two counts (tokens, milliseconds), stopping at the largest int64; a
// negative count is taken as 0.
func AddCount(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// AddCost adds two costs, stopping at the largest float64; a negative or
// non-finite cost is taken as 0.
func AddCost(a, b float64) float64 {
	clean := func(x float64) float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return 0
		}
		return x
	}
	s := clean(a) + clean(b)
	if math.IsInf(s, 0) {
		return math.MaxFloat64
	}
	return s
}

// UnmarshalJSON reads an answer's "usage" field by field, as parseUsage
// does: a bad number is refused (and noted) without refusing the answer.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	known := u.Known
	*u, _ = parseUsage(raw)
	u.Known = known || u.Known
	if v, ok := raw["refused"]; ok {
		var notes string
		if json.Unmarshal(v, &notes) == nil {
			mine := u.Refused
			u.Refused = notes
			u.refuse(mine)
		}
	}
	return nil
}

// readUsageFile sums the usage file at path.
func readUsageFile(path string) Usage {
	f, err := os.Open(path)
	if err != nil {
		return Usage{}
	}
	defer f.Close()
	return sumUsage(f)
}

// usageInOutput is the answer's "usage", if stdout is a JSON object that
// carries one: what a failed attempt's own output says it cost.
func usageInOutput(out []byte) Usage {
	var v struct {
		Usage *Usage `json:"usage"`
	}
	if json.Unmarshal(bytes.TrimSpace(out), &v) != nil || v.Usage == nil {
		return Usage{}
	}
	v.Usage.Known = true // reported, even if as nothing
	return *v.Usage
}

// hasUsage reports whether a decoded answer carries a non-null "usage".
func hasUsage(raw map[string]json.RawMessage) bool {
	v, ok := raw["usage"]
	return ok && string(v) != "null"
}
