package hooks

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aot-loop/aot/internal/journal"
)

// An in-session loop's agent is the session itself: what its model calls
// cost is in the session's transcript (Claude Code writes the usage of
// every model answer there), not in any attempt's answer. At each of the
// owning session's stops, the tokens its transcript gained since the last
// stop are journaled as one session_usage event, so that aot status and
// the dashboard count an in-session loop's spend as they count a run's.

// usageMark is where the journaled part of a transcript ends: its path,
// the bytes read, the tokens counted and the last answer counted (an
// answer's lines repeat its usage, one line per content block).
type usageMark struct {
	Transcript string `json:"transcript"`
	Offset     int64  `json:"offset"`
	Tokens     int64  `json:"tokens"`
	LastID     string `json:"last_id"`
}

func usageMarkPath(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "session-usage.json")
}

// transcriptLine is the part of a transcript line that carries usage.
type transcriptLine struct {
	Type    string `json:"type"`
	Message struct {
		ID    string `json:"id"`
		Usage *struct {
			InputTokens         int64 `json:"input_tokens"`
			OutputTokens        int64 `json:"output_tokens"`
			CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
			CacheReadTokens     int64 `json:"cache_read_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
}

// journalSessionUsage journals what the session's transcript gained since
// the last stop. It is best effort: a transcript it cannot read costs the
// loop its count, never the hook's decision.
func journalSessionUsage(stateFile string, in Input) error {
	if in.TranscriptPath == "" {
		return nil
	}
	var m usageMark
	if data, err := os.ReadFile(usageMarkPath(stateFile)); err == nil {
		_ = json.Unmarshal(data, &m)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if m.Transcript != in.TranscriptPath {
		m = usageMark{Transcript: in.TranscriptPath}
	}
	f, err := os.Open(in.TranscriptPath)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() < m.Offset {
		m = usageMark{Transcript: in.TranscriptPath} // rewritten: count it again
	}
	if _, err := f.Seek(m.Offset, io.SeekStart); err != nil {
		return err
	}
	var inTok, outTok int64
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // a line still being written is read at the next stop
		}
		m.Offset += int64(len(line))
		var tl transcriptLine
		if json.Unmarshal(line, &tl) != nil || tl.Type != "assistant" || tl.Message.Usage == nil || tl.Message.ID == m.LastID {
			continue
		}
		m.LastID = tl.Message.ID
		u := tl.Message.Usage
		inTok += u.InputTokens + u.CacheCreationTokens + u.CacheReadTokens
		outTok += u.OutputTokens
	}
	if inTok+outTok > 0 {
		m.Tokens += inTok + outTok
		j, err := journal.Open(journal.PathFor(stateFile))
		if err != nil {
			return err
		}
		ev := journal.Event{Tokens: inTok + outTok, Reason: "the model calls of session " + in.SessionID}.With(
			journal.SessionUsageData{Session: in.SessionID, InputTokens: journal.Count(inTok), OutputTokens: journal.Count(outTok)})
		if err := errors.Join(j.Append(ev), j.Close()); err != nil {
			return err
		}
	}
	data, _ := json.Marshal(m)
	return os.WriteFile(usageMarkPath(stateFile), data, journal.FileMode)
}
