package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
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

// usageLine is one line of the usage file; a field may be omitted.
type usageLine struct {
	InputTokens  *int64   `json:"input_tokens"`
	OutputTokens *int64   `json:"output_tokens"`
	CostUSD      *float64 `json:"cost_usd"`
}

// sumUsage adds up the valid lines of a usage file. A line is valid when it
// is one JSON object with at least one of the three fields, each a
// non-negative number (tokens whole). Torn, invalid or oversized lines are
// skipped. Known is true when at least one line was valid.
func sumUsage(r io.Reader) Usage {
	var u Usage
	br := bufio.NewReaderSize(r, 4096)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) > maxUsageLine {
				line = line[:0]
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
		if l, ok := parseUsageLine(line); ok && len(line) <= maxUsageLine {
			u.InputTokens += *l.InputTokens
			u.OutputTokens += *l.OutputTokens
			u.CostUSD += *l.CostUSD
			u.Known = true
		}
		line = line[:0]
		if err != nil {
			return u
		}
	}
}

func parseUsageLine(b []byte) (usageLine, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return usageLine{}, false
	}
	var l usageLine
	if err := json.Unmarshal(b, &l); err != nil {
		return usageLine{}, false
	}
	if l.InputTokens == nil && l.OutputTokens == nil && l.CostUSD == nil {
		return usageLine{}, false
	}
	var zi int64
	var zf float64
	if l.InputTokens == nil {
		l.InputTokens = &zi
	}
	if l.OutputTokens == nil {
		l.OutputTokens = &zi
	}
	if l.CostUSD == nil {
		l.CostUSD = &zf
	}
	if *l.InputTokens < 0 || *l.OutputTokens < 0 || *l.CostUSD < 0 {
		return usageLine{}, false
	}
	return l, true
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
	v.Usage.Known = true
	return *v.Usage
}

// hasUsage reports whether a decoded answer carries a non-null "usage".
func hasUsage(raw map[string]json.RawMessage) bool {
	v, ok := raw["usage"]
	return ok && string(v) != "null"
}
