// Package journal is the loop's append-only event log: one JSON object per
// line in .claude/aot-loop/events.ndjson. It is the engine's write-ahead log:
// an event is durable once Sync returns.
package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Dir is the directory beside the state file that holds the journal and the
// per-attempt agent logs.
const Dir = "aot-loop"

// FileName is the journal's file name inside Dir.
const FileName = "events.ndjson"

// Modes of what aot creates in Dir: the journal, the agents' logs and the
// run lock are the project's history and may hold secrets an agent printed,
// so other users are kept out.
const (
	DirMode  os.FileMode = 0o700 // Dir and the folders in it
	FileMode os.FileMode = 0o600 // the files in them
)

// DirFor returns the aot-loop folder of a state file: beside the real file,
// symbolic links resolved, so that every path to one state file finds the
// same journal and run lock.
func DirFor(stateFile string) string {
	if real, err := filepath.EvalSymlinks(stateFile); err == nil {
		stateFile = real
	}
	return filepath.Join(filepath.Dir(stateFile), Dir)
}

// PathFor returns the journal path for a state file (in DirFor).
func PathFor(stateFile string) string {
	return filepath.Join(DirFor(stateFile), FileName)
}

// Event types.
const (
	RunStart    = "run_start"
	RunResume   = "run_resume"
	Iteration   = "iteration"
	AtomStart   = "atom_start"
	AtomFinish  = "atom_finish"
	AtomReset   = "atom_reset"
	ORSwitch    = "or_switch"
	ORExhausted = "or_exhausted"
	Decompose   = "decompose"
	AddAtom     = "add_atom"
	ParentDone  = "parent_resolved"
	Verify      = "verify"
	Progress    = "progress"
	Stall       = "stall"
	Redirect    = "redirect"
	Stop        = "stop"
	Checkpoint  = "checkpoint"  // the state file holds everything before this line
	Backoff     = "backoff"     // a failed atom waits before its next step
	Parked      = "atom_parked" // an atom used up max_attempts_per_atom
	QuotaWait   = "quota_wait"  // the agent's quota is spent until a given time
	QuotaResume = "quota_resume"
	Confirm     = "confirm"       // a person's word on an assertion the judge passed: ok true confirmed (or unconfirmed, no terminal), false refused; data: item
	RateLimit   = "rate_limit"    // the provider answered 429/503/529: the loop waits, with fewer agents
	Process     = "agent_process" // an attempt's process tree, killed by a resuming engine if it outlived its engine
	HandEdit    = "hand_edit"     // the state file was changed behind the engine's back
	Workspace   = "workspace"     // the run's isolation: integration worktree and branch, or none
	Worktree    = "worktree"      // an attempt's worktree, journaled before it exists; or an orphan removed
	Merge       = "merge"         // an attempt's changes merged (or a conflict): changed files, commit
	Landing     = "landing"       // where the merged work landed at the end of the run
	Pause       = "pause"         // a person paused the loop: nothing new starts; data: kill, running
	Resume      = "resume"        // a paused loop goes on; data: paused_ms
)

// PermissionDenied: the agent's CLI refused a tool call; data: tool, path,
// why.
const PermissionDenied = "permission_denied"

// Event is one line of the journal. Fields that do not apply are left out.
type Event struct {
	Time       time.Time      `json:"time"`
	Type       string         `json:"type"`
	Iteration  int            `json:"iteration,omitempty"`
	Atom       string         `json:"atom,omitempty"`
	Role       string         `json:"role,omitempty"`
	Attempt    int            `json:"attempt,omitempty"`
	OK         *bool          `json:"ok,omitempty"`
	DurationMS int64          `json:"duration_ms,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	Tokens     int64          `json:"tokens,omitempty"`
	CostUSD    float64        `json:"cost_usd,omitempty"`
	Data       map[string]any `json:"data,omitempty"`
}

// Bool is a helper for Event.OK.
func Bool(b bool) *bool { return &b }

// Journal appends events to one file. It is safe for concurrent use.
type Journal struct {
	mu    sync.Mutex
	f     *os.File
	w     *bufio.Writer
	dirty bool
	now   func() time.Time
}

// Open opens (creating it and its directory if needed, with FileMode and
// DirMode) the journal at path for appending. The caller has checked the
// state file (runlock.Acquire does) before asking for its journal. A torn
// last line left by a crash (an event that was never synced) is cut off, so
// the file stays a sequence of whole lines.
func Open(path string) (*Journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), DirMode); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, FileMode)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := cutTornTail(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: %s: %w", path, err)
	}
	return &Journal{f: f, w: bufio.NewWriterSize(f, 64<<10), now: time.Now}, nil
}

// cutTornTail truncates f after its last newline.
func cutTornTail(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	end := fi.Size()
	buf := make([]byte, 64<<10)
	for pos := end; pos > 0; {
		n := int64(len(buf))
		if pos < n {
			n = pos
		}
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil && err != io.EOF {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := pos + int64(i) + 1
			if keep == end {
				return nil
			}
			return f.Truncate(keep)
		}
	}
	if end == 0 {
		return nil
	}
	return f.Truncate(0)
}

// Append writes one event to the file at once, so that readers (aot status,
// aot top, aot serve's streams) see it without waiting; it is durable after
// the next Sync, which fsyncs the batch. A zero Time is set to now.
func (j *Journal) Append(e Event) error {
	if e.Time.IsZero() {
		e.Time = j.now()
	}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("journal: closed")
	}
	line = append(line, '\n')
	if _, err := j.w.Write(line); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.dirty = true
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// Sync writes buffered events and fsyncs the file: once it returns, every
// appended event survives a crash.
func (j *Journal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil || !j.dirty {
		return nil
	}
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: fsync: %w", err)
	}
	j.dirty = false
	return nil
}

// Close syncs and closes the journal.
func (j *Journal) Close() error {
	err := j.Sync()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		if cerr := j.f.Close(); err == nil {
			err = cerr
		}
		j.f = nil
	}
	return err
}

// Skipped is a complete line of the journal that is not an event (a disk
// error, a hand edit, a write by something else): readers skip it.
type Skipped struct {
	Path string `json:"path"`
	Line int    `json:"line"` // 1-based
	Err  string `json:"error"`
}

func (s Skipped) String() string {
	return fmt.Sprintf("%s:%d: skipped a line that is not a journal event (%s)", s.Path, s.Line, s.Err)
}

// Read returns every complete event of the journal at path. A torn last line
// (a crash mid-write) is ignored, and so is a malformed line elsewhere: Scan
// says which lines were skipped.
func Read(path string) ([]Event, error) {
	events, _, err := Scan(path)
	return events, err
}

// Scan returns every complete event of the journal at path and the complete
// lines it skipped because they are not events, with their line numbers. A
// torn last line is neither: it is still being written, or a crash cut it.
// The error is only ever the file's (missing, unreadable).
func Scan(path string) ([]Event, []Skipped, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	events, skipped, _ := decode(data, path, 1)
	return events, skipped, nil
}

// decode reads the complete lines of data, the first numbered first. It
// returns the events, the lines skipped, and how many bytes the complete
// lines take (a torn tail is left for later).
func decode(data []byte, path string, first int) ([]Event, []Skipped, int) {
	var out []Event
	var skipped []Skipped
	used := 0
	for n := first; used < len(data); n++ {
		i := bytes.IndexByte(data[used:], '\n')
		if i < 0 {
			break // torn tail
		}
		line := data[used : used+i]
		used += i + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			skipped = append(skipped, Skipped{Path: path, Line: n, Err: err.Error()})
			continue
		}
		out = append(out, e)
	}
	return out, skipped, used
}

// Follower reads a journal as it grows (aot logs --follow): each Next
// returns the complete lines appended since the last one.
type Follower struct {
	path string
	off  int64
	line int // the number of the next line
}

// NewFollower starts at the beginning of the journal at path.
func NewFollower(path string) *Follower { return &Follower{path: path, line: 1} }

// Next returns the events (and skipped lines) completed since the last call.
// A journal that does not exist yet has nothing new; one that shrank below
// what was read (a new journal) is read again from its start.
func (f *Follower) Next() ([]Event, []Skipped, error) {
	file, err := os.Open(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() < f.off {
		f.off, f.line = 0, 1
	}
	if fi.Size() == f.off {
		return nil, nil, nil
	}
	data := make([]byte, fi.Size()-f.off)
	n, err := file.ReadAt(data, f.off)
	if err != nil && err != io.EOF {
		return nil, nil, err
	}
	data = data[:n]
	events, skipped, used := decode(data, f.path, f.line)
	f.off += int64(used)
	f.line += bytes.Count(data[:used], []byte{'\n'})
	return events, skipped, nil
}

// ReadSinceCheckpoint returns the complete events after the last checkpoint
// (all of them when there is none; lines that are not events are skipped),
// reading the file backwards from its end:
// a resume costs what happened since the last write of the state file, not
// the whole history.
func ReadSinceCheckpoint(path string) ([]Event, error) {
	_, after, err := ReadFromCheckpoint(path)
	return after, err
}

// ReadFromCheckpoint returns the last checkpoint (nil when there is none) and
// the complete events after it: what a resuming engine needs to know of the
// run before it. It reads the file backwards, once, only as far as that
// checkpoint.
func ReadFromCheckpoint(path string) (*Event, []Event, error) {
	cp, after, whole, err := scanBack(path)
	if err != nil {
		return nil, nil, err
	}
	if cp == nil {
		if whole {
			events, _, _ := decode(after, path, 1)
			return nil, events, nil
		}
		return nil, nil, nil // the checkpoint is the (torn) last line
	}
	var e Event
	if err := json.Unmarshal(cp, &e); err != nil {
		return nil, nil, fmt.Errorf("%s: checkpoint: %w", path, err)
	}
	events, _, _ := decode(after, path, 0)
	return &e, events, nil
}

// scanBack reads path backwards to its last complete checkpoint line: cp is
// that line (nil when none was found) and after the bytes that follow it.
// With no checkpoint, whole says after is the whole file; a torn checkpoint
// as the last line gives neither.
func scanBack(path string) (cp, after []byte, whole bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, false, err
	}
	marker := []byte(`"type":"` + Checkpoint + `"`)
	var tail []byte // the bytes read so far, from pos to the end
	pos := fi.Size()
	chunk := make([]byte, 64<<10)
	for pos > 0 {
		n := min(int64(len(chunk)), pos)
		pos -= n
		if _, err := f.ReadAt(chunk[:n], pos); err != nil && err != io.EOF {
			return nil, nil, false, err
		}
		tail = append(append([]byte(nil), chunk[:n]...), tail...)
		// Look for a checkpoint on a whole line within what has been read.
		i := bytes.LastIndex(tail, marker)
		if i < 0 {
			continue
		}
		start := bytes.LastIndexByte(tail[:i], '\n')
		if start < 0 && pos > 0 {
			continue // the line starts in a chunk not read yet
		}
		end := bytes.IndexByte(tail[i:], '\n')
		if end < 0 {
			return nil, nil, false, nil
		}
		return tail[start+1 : i+end], tail[i+end+1:], false, nil
	}
	return nil, tail, true, nil
}
