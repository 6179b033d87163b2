package ccw

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// The files of a loop's view, in its CCW folder (dir):
//
//	{id}.json             the Loop document
//	{id}.tasks.jsonl      the task list, one task per line
//	{id}.progress/        develop.md, debug.md, validate.md, summary.md
//	                      (summary.md's front matter keeps the API's fields),
//	                      changes.log and debug.log (NDJSON, appended)
//
// They hold agents' summaries and failures, which may quote secrets, so they
// get the journal's modes.
const (
	progressSuffix = ".progress"
	tasksSuffix    = ".tasks.jsonl"
	changesLog     = "changes.log"
	debugLog       = "debug.log"
	summaryFile    = "summary.md"
)

// DocPath is where the Loop document of id lives in dir.
func DocPath(dir, id string) string { return filepath.Join(dir, id+".json") }

// ProgressDir is the progress folder of id in dir.
func ProgressDir(dir, id string) string { return filepath.Join(dir, id+progressSuffix) }

// Write writes the loop's view into dir: the Markdown files and the task
// list are rewritten (only when they changed), the logs take the journal
// events they do not have yet, and the document is written last, so a
// progress folder is never behind the document it belongs to. Every
// rewrite is atomic: a crash leaves the old file or the new one. events is
// the loop's whole journal, as given to Build.
func Write(dir string, l Loop, events []journal.Event) error {
	return files{rename: os.Rename}.write(dir, l, events)
}

// files writes the view; rename is os.Rename but for tests that crash it.
type files struct {
	rename func(from, to string) error
}

func (f files) write(dir string, l Loop, events []journal.Event) error {
	if !ValidID(l.LoopID) {
		return fmt.Errorf("ccw: %q is not a loop id", l.LoopID)
	}
	prog := ProgressDir(dir, l.LoopID)
	if err := os.MkdirAll(prog, journal.DirMode); err != nil {
		return fmt.Errorf("ccw: %w", err)
	}
	for _, p := range []struct {
		name string
		data []byte
	}{
		{"develop.md", renderDevelop(l)},
		{"debug.md", renderDebug(l)},
		{"validate.md", renderValidate(l)},
		{summaryFile, renderSummary(l)},
	} {
		if err := f.replace(filepath.Join(prog, p.name), p.data); err != nil {
			return err
		}
	}
	if err := f.appendLog(filepath.Join(prog, changesLog), events, changeEntry); err != nil {
		return err
	}
	if err := f.appendLog(filepath.Join(prog, debugLog), events, debugEntry); err != nil {
		return err
	}
	var tasks bytes.Buffer
	if l.SkillState != nil {
		enc := json.NewEncoder(&tasks)
		for _, t := range l.SkillState.Develop.Tasks {
			if err := enc.Encode(t); err != nil {
				return fmt.Errorf("ccw: %w", err)
			}
		}
	}
	if err := f.replace(filepath.Join(dir, l.LoopID+tasksSuffix), tasks.Bytes()); err != nil {
		return err
	}
	doc, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return fmt.Errorf("ccw: %w", err)
	}
	return f.replace(DocPath(dir, l.LoopID), append(doc, '\n'))
}

// replace writes data to path atomically unless the file already holds it.
func (f files) replace(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return f.atomic(path, data)
}

// atomic replaces path with data: a temp file in the same folder, fsync,
// rename, fsync of the folder. A crash at any moment leaves the old file
// or the new one.
func (f files) atomic(path string, data []byte) error {
	if err := state.WriteFileRenaming(path, data, journal.FileMode, f.rename); err != nil {
		return fmt.Errorf("ccw: %w", err)
	}
	return nil
}

// logLine is the head every line of changes.log and debug.log starts
// with: seq is the event's 1-based place among the journal's events, and
// time and type let a later Write see whether the journal is still the
// one the log was written from.
type logLine struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"timestamp"`
	Type string    `json:"type"`
}

// appendLog brings an NDJSON log in step with the journal: it appends the
// entries of the events after the log's last line. A log whose first or
// last line does not match the journal (a new journal, a hand edit) is
// rewritten whole; a torn last line (a crash mid-append) is cut off first.
func (f files) appendLog(path string, events []journal.Event, entry func(seq int, ev *journal.Event) any) error {
	last, err := lastLine(path)
	if err != nil {
		return err
	}
	from := 0
	if last != nil {
		inStep := func(line []byte) (int, bool) {
			var head logLine
			ok := json.Unmarshal(line, &head) == nil && head.Seq >= 1 && head.Seq <= len(events) &&
				events[head.Seq-1].Type == head.Type && events[head.Seq-1].Time.Equal(head.Time)
			return head.Seq, ok
		}
		seq, ok := inStep(last)
		if ok {
			_, ok = inStep(firstLogLine(path))
		}
		if !ok {
			return f.atomic(path, logLines(events, 0, entry))
		}
		from = seq
	}
	data := logLines(events, from, entry)
	if len(data) == 0 {
		if last == nil {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return f.atomic(path, nil)
			}
		}
		return nil
	}
	if last == nil {
		return f.atomic(path, data)
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, journal.FileMode)
	if err != nil {
		return fmt.Errorf("ccw: %w", err)
	}
	if _, err := file.Write(data); err != nil {
		_ = file.Close()
		return fmt.Errorf("ccw: append %s: %w", path, err)
	}
	if err := file.Sync(); err != nil {
		_ = file.Close()
		return fmt.Errorf("ccw: append %s: fsync: %w", path, err)
	}
	return file.Close()
}

func logLines(events []journal.Event, from int, entry func(seq int, ev *journal.Event) any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := from; i < len(events); i++ {
		if e := entry(i+1, &events[i]); e != nil {
			_ = enc.Encode(e)
		}
	}
	return buf.Bytes()
}

// firstLogLine returns the first line of the file at path (nil when it
// cannot be read).
func firstLogLine(path string) []byte {
	file, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer file.Close()
	line, _ := bufio.NewReader(file).ReadBytes('\n')
	return bytes.TrimSuffix(line, []byte{'\n'})
}

// lastLine returns the last complete line of the file at path (nil when
// the file is missing or has none), cutting off a torn tail.
func lastLine(path string) ([]byte, error) {
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ccw: %w", err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, fmt.Errorf("ccw: %w", err)
	}
	size := fi.Size()
	var tail []byte
	for pos := size; pos > 0; {
		n := min(int64(64<<10), pos)
		pos -= n
		chunk := make([]byte, n)
		if _, err := file.ReadAt(chunk, pos); err != nil && err != io.EOF {
			return nil, fmt.Errorf("ccw: read %s: %w", path, err)
		}
		tail = append(chunk, tail...)
		end := bytes.LastIndexByte(tail, '\n')
		if end < 0 {
			continue
		}
		if keep := pos + int64(end) + 1; keep != size {
			if err := file.Truncate(keep); err != nil {
				return nil, fmt.Errorf("ccw: %s: %w", path, err)
			}
		}
		start := bytes.LastIndexByte(tail[:end], '\n')
		if start < 0 && pos > 0 {
			continue // the line starts further back
		}
		return tail[start+1 : end], nil
	}
	if size > 0 {
		if err := file.Truncate(0); err != nil {
			return nil, fmt.Errorf("ccw: %s: %w", path, err)
		}
	}
	return nil, nil
}

// changeEntry is a line of changes.log: the files a resolved atom changed
// (its binding's artifacts) and the merges of isolated attempts.
type changeEntryLine struct {
	logLine
	Task      string   `json:"task"`
	Attempt   int      `json:"attempt,omitempty"`
	Iteration int      `json:"iteration,omitempty"`
	Summary   string   `json:"summary,omitempty"`
	Files     []string `json:"files"`
	Commit    string   `json:"commit,omitempty"`
	Conflict  bool     `json:"conflict,omitempty"`
}

func changeEntry(seq int, ev *journal.Event) any {
	ok := ev.OK == nil || *ev.OK
	e := changeEntryLine{logLine: logLine{Seq: seq, Time: ev.Time, Type: ev.Type}, Task: ev.Atom, Attempt: ev.Attempt, Iteration: ev.Iteration}
	switch {
	case ev.Type == journal.AtomFinish && ok && (ev.Role == "worker" || ev.Role == "") && ev.Atom != baseCaseAtom,
		ev.Type == journal.ParentDone:
		if ev.Type == journal.ParentDone {
			d := journal.DataOf[journal.ParentDoneData](*ev)
			e.Summary, e.Files = d.Summary, d.Artifacts
		} else {
			d := journal.DataOf[journal.AtomFinishData](*ev)
			e.Summary, e.Files = d.Summary, d.Artifacts
		}
	case ev.Type == journal.Merge:
		d := journal.DataOf[journal.MergeData](*ev)
		e.Files, e.Commit = d.Changed, d.Commit
		e.Conflict = !ok
	default:
		return nil
	}
	if e.Files == nil {
		e.Files = []string{}
	}
	return e
}

// debugEntryLine is a line of debug.log: a failure or a backtrack.
type debugEntryLine struct {
	logLine
	Task      string   `json:"task,omitempty"`
	Role      string   `json:"role,omitempty"`
	Attempt   int      `json:"attempt,omitempty"`
	Iteration int      `json:"iteration,omitempty"`
	Kind      string   `json:"kind,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	ORGroup   string   `json:"or_group,omitempty"`
	Failed    string   `json:"failed,omitempty"`
	Failures  []string `json:"failures,omitempty"`
}

func debugEntry(seq int, ev *journal.Event) any {
	ok := ev.OK == nil || *ev.OK
	switch ev.Type {
	case journal.AtomFinish, journal.Verify:
		if ok {
			return nil
		}
	case journal.AtomReset, journal.Parked, journal.ORSwitch, journal.ORExhausted, journal.Stall:
	default:
		return nil
	}
	e := debugEntryLine{logLine: logLine{Seq: seq, Time: ev.Time, Type: ev.Type}, Task: ev.Atom, Role: ev.Role,
		Attempt: ev.Attempt, Iteration: ev.Iteration, Reason: ev.Reason}
	switch ev.Type {
	case journal.Verify:
		e.Failures = journal.DataOf[journal.VerifyData](*ev).Failures
	case journal.AtomFinish:
		e.Kind = journal.DataOf[journal.AtomFinishData](*ev).Kind
	case journal.ORSwitch:
		d := journal.DataOf[journal.ORSwitchData](*ev)
		e.ORGroup, e.Failed = d.ORGroup, d.Failed
	}
	return e
}

// CheckOutputs reads the whole output of each command check of the last
// verification, which the engine keeps beside the journal of stateFile
// (aot-loop/checks/ITEM.out), keyed by check. A check whose file is
// missing or unreadable is left out.
func CheckOutputs(stateFile string, events []journal.Event) map[string]string {
	var last *journal.Event
	for i := len(events) - 1; i >= 0 && last == nil; i-- {
		if events[i].Type == journal.Verify {
			last = &events[i]
		}
	}
	if last == nil {
		return nil
	}
	v := validate(last, 1, nil)
	dir := filepath.Join(journal.DirFor(stateFile), "checks")
	out := map[string]string{}
	var walk func(items []verify.ItemResult)
	walk = func(items []verify.ItemResult) {
		for _, it := range items {
			if it.Type == state.CheckCommand || it.Type == state.CheckNotCommand {
				if data, err := os.ReadFile(filepath.Join(dir, outputName(it.Item))); err == nil {
					out[it.Item] = string(data)
				}
			}
			walk(it.GroupResults)
			walk(it.AnyOfResults)
		}
	}
	walk(v.Checklist)
	return out
}

// outputName is the engine's file name for a check's output: the item
// with path separators, colons and control characters made '_'.
func outputName(item string) string {
	b := []byte(item)
	for i, c := range b {
		if c < ' ' || c == '/' || c == '\\' || c == ':' {
			b[i] = '_'
		}
	}
	return string(b) + ".out"
}
