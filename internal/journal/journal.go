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
	"math"
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
	// UsageRefused: numbers an agent reported as its usage that no sum can
	// use (negative, not finite, not whole); data: refused.
	UsageRefused = "usage_refused"
	// JournalLost: the journal was deleted, replaced or cut behind the
	// engine's back and written back from what the engine holds; data: kept, lost_bytes.
	JournalLost = "journal_lost"
)

// PermissionDenied: the agent's CLI refused a tool call; data: tool, path,
// why.
const PermissionDenied = "permission_denied"

// ModelRetry: the agent's CLI itself called the model again after a failed
// call (a 429, a 5xx, a dropped connection); reason: what failed and when
// it tried again. Journaled at the attempt's end, one per retry.
const ModelRetry = "model_retry"

// SessionUsage: the tokens an in-session loop's owning session used since
// its last stop, from its transcript (tokens; data: session,
// input_tokens, output_tokens). Journaled by the session's stop hook.
const SessionUsage = "session_usage"

// AttemptRetry: Temporal retries an activity of a loop on Temporal (an
// attempt, a merge, a verification) after an infrastructure failure (a
// worker died, the remote refused); journaled by the client that saw it;
// data: activity, activity_id, try, worker, failure.
const AttemptRetry = "attempt_retry"

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
	path  string
	f     *os.File
	w     *bufio.Writer
	size  int64 // what the file holds by this journal's count
	dirty bool
	now   func() time.Time
	// OnLost, when set, is told (from any goroutine) why the journal was
	// written back: deleted, replaced or cut behind the journal's back.
	OnLost func(why string)
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
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &Journal{path: path, f: f, w: bufio.NewWriterSize(f, 64<<10), size: fi.Size(), now: time.Now}, nil
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
// the next Sync, which fsyncs the batch. A zero Time is set to now. An
// event whose data or cost JSON cannot encode is written without them, with
// data.unencodable saying why: it is never dropped.
func (j *Journal) Append(e Event) error {
	if e.Time.IsZero() {
		e.Time = j.now()
	}
	line, err := json.Marshal(e)
	if err != nil {
		// A value JSON cannot hold (+Inf, NaN) in its data: the event is
		// still journaled, without what could not be encoded, and says so.
		e.Data = map[string]any{"unencodable": err.Error()}
		if math.IsNaN(e.CostUSD) || math.IsInf(e.CostUSD, 0) {
			e.CostUSD = 0
		}
		if line, err = json.Marshal(e); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
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
	j.size += int64(len(line))
	j.dirty = true
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// Sync writes buffered events and fsyncs the file: once it returns, every
// appended event survives a crash. A journal lost behind its back is
// written back first (see Verify).
func (j *Journal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	if err := j.verify(); err != nil {
		return err
	}
	if !j.dirty {
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

// Verify checks that the journal's path still holds this journal, whole,
// and writes it back when it does not, as the engine does its state file:
//   - deleted (an agent's rm, a cleanup): the open file still holds every
//     event, and is put back at its path;
//   - replaced by another file: that file is kept beside it
//     (events.ndjson.replaced-TIME), and this journal put back;
//   - cut in place: what is left is kept; the bytes cut are lost, and said.
//
// The journal's folder is made again only inside a folder that is still
// there: a project moved or deleted is not recreated at its old path.
// A journal_lost event after the events written back says what happened,
// and OnLost is told.
func (j *Journal) Verify() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	return j.verify()
}

func (j *Journal) verify() error {
	mine, err := j.f.Stat()
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	at, err := os.Stat(j.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("journal: %w", err)
	}
	if err == nil && os.SameFile(at, mine) && mine.Size() >= j.size {
		return nil
	}
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	data := make([]byte, j.size)
	n, rerr := j.f.ReadAt(data, 0)
	if rerr != nil && rerr != io.EOF {
		return fmt.Errorf("journal: read back %s: %w", j.path, rerr)
	}
	data = data[:n]
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1] // a line cut in half by a truncation
	}
	var lost JournalLostData
	var why string
	switch {
	case at == nil:
		why = "the journal was deleted behind the engine's back; written back from the open file"
	case !os.SameFile(at, mine):
		why = "the journal was replaced behind the engine's back; written back from the open file"
	default:
		lost.LostBytes = j.size - int64(len(data))
		why = fmt.Sprintf("the journal was cut behind the engine's back: %d bytes of it are lost; the rest is kept, and the next checkpoint carries the loop's totals", lost.LostBytes)
	}
	dir := filepath.Dir(j.path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, DirMode); err != nil {
			return fmt.Errorf("journal: %s is gone with its folder, which cannot be made again: %w", j.path, err)
		}
	}
	if at != nil && !os.SameFile(at, mine) {
		kept := fmt.Sprintf("%s.replaced-%s", j.path, j.now().UTC().Format("20060102T150405.000Z"))
		if err := os.Rename(j.path, kept); err == nil {
			lost.Kept = kept
			why += "; the file found there is kept in " + kept
		}
	}
	line, err := json.Marshal(Event{Time: j.now(), Reason: why}.With(lost))
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	data = append(data, append(line, '\n')...)
	f, err := writeBack(j.path, data)
	if err != nil {
		return fmt.Errorf("journal: write %s back: %w", j.path, err)
	}
	_ = j.f.Close()
	j.f, j.size, j.dirty = f, int64(len(data)), false
	j.w.Reset(f)
	if j.OnLost != nil {
		j.OnLost(why)
	}
	return nil
}

// writeBack puts data at path whole (a temporary file renamed over it,
// synced) and opens it for appending.
func writeBack(path string, data []byte) (*os.File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+FileName+".*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), FileMode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return nil, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return os.OpenFile(path, os.O_RDWR|os.O_APPEND, FileMode)
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
		e, err := decodeLine(line)
		if err != nil {
			skipped = append(skipped, Skipped{Path: path, Line: n, Err: err.Error()})
			continue
		}
		out = append(out, e)
	}
	return out, skipped, used
}

// decodeLine reads one line as an event. Numbers in its data read as
// float64; the payload types read them back (a token count past 2^53
// saturates, see Count).
func decodeLine(line []byte) (Event, error) {
	var e Event
	err := json.Unmarshal(line, &e)
	return e, err
}

// Follower reads a journal as it grows (aot logs --follow, aot serve): each
// Next returns the complete lines appended since the last one.
type Follower struct {
	path     string
	off      int64
	line     int         // the number of the next line
	file     os.FileInfo // the file read so far
	first    []byte      // its first line, once read
	last     []byte      // the last line read, which ends at off
	replaced bool
}

// NewFollower starts at the beginning of the journal at path.
func NewFollower(path string) *Follower { return &Follower{path: path, line: 1} }

// Next returns the events (and skipped lines) completed since the last call.
// A journal that does not exist yet has nothing new. A journal replaced
// since the last call (a first line that is not the one read, shorter than
// what was read, or another file that does not hold the lines read where
// they were) is read again from its start, and Replaced says so. The same
// journal written back by its engine (journal_lost) is read on from where
// the last call ended.
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
	if f.file != nil && (fi.Size() < f.off || !f.holds(file, 0, f.first) ||
		!os.SameFile(fi, f.file) && !f.holds(file, f.off-int64(len(f.last)), f.last)) {
		f.off, f.line, f.first, f.last, f.replaced = 0, 1, nil, nil, true
	}
	f.file = fi
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
	if used > 0 {
		if f.off == 0 {
			f.first = append([]byte(nil), data[:bytes.IndexByte(data, '\n')+1]...)
		}
		f.last = append(f.last[:0], data[bytes.LastIndexByte(data[:used-1], '\n')+1:used]...)
	}
	f.off += int64(used)
	f.line += bytes.Count(data[:used], []byte{'\n'})
	return events, skipped, nil
}

// holds reports whether file has line at off.
func (f *Follower) holds(file *os.File, off int64, line []byte) bool {
	if len(line) == 0 {
		return true
	}
	b := make([]byte, len(line))
	n, _ := file.ReadAt(b, off)
	return bytes.Equal(b[:n], line)
}

// Replaced reports whether the journal was replaced since the last call:
// the events returned since then are the new journal's, from its start, and
// whatever was built from the old one is to be built again.
func (f *Follower) Replaced() bool {
	r := f.replaced
	f.replaced = false
	return r
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
// checkpoint. A checkpoint is a line that decodes as one event of type
// checkpoint: a stray line that merely contains the words (a hand edit, a
// write by something else) is skipped like any line that is not an event.
// The error is the file's: a journal that cannot be read is never taken for
// an empty one.
func ReadFromCheckpoint(path string) (*Event, []Event, error) {
	cp, after, err := scanBack(path)
	if err != nil {
		return nil, nil, err
	}
	events, _, _ := decode(after, path, 0)
	return cp, events, nil
}

// scanBack reads path backwards, a whole line at a time, to its last
// complete checkpoint event: cp is that event (nil when there is none) and
// after the bytes that follow its line (the whole file when there is none).
// A torn last line is never a checkpoint.
func scanBack(path string) (cp *Event, after []byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	word := []byte(`"` + Checkpoint + `"`)
	var tail []byte     // the bytes read so far: the file from pos to its end
	pos := fi.Size()    // where tail starts in the file
	unseen := fi.Size() // lines that start at or after this offset were looked at
	size := int64(64 << 10)
	for pos > 0 {
		n := min(size, pos)
		pos -= n
		chunk := make([]byte, n, n+int64(len(tail)))
		if _, err := f.ReadAt(chunk, pos); err != nil && err != io.EOF {
			return nil, nil, err
		}
		tail = append(chunk, tail...)
		size *= 2 // each read doubles, so copying the tail stays linear
		for {
			region := tail[:unseen-pos]
			nl := bytes.LastIndexByte(region, '\n') // the end of the next line back
			if nl < 0 {
				break
			}
			start := bytes.LastIndexByte(region[:nl], '\n') + 1
			if start == 0 && pos > 0 {
				break // the line starts in a part not read yet
			}
			line := region[start:nl]
			unseen = pos + int64(start)
			if !bytes.Contains(line, word) {
				continue
			}
			if e, err := decodeLine(line); err == nil && e.Type == Checkpoint {
				return &e, tail[nl+1:], nil
			}
		}
	}
	return nil, tail, nil
}
