package durable

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	loghist "github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// An agent's log travels from the worker that ran it to the client: the
// activity returns what the agent printed (the part of its log file the
// activity wrote, the end of it when large), the workflow keeps the last
// ones for its status query, and the client appends them to its own logs
// folder, where aot logs reads them.

// MaxAgentLog is how much of what an agent printed during one activity
// travels to the client: the last 64 KiB, after a line that says what was
// cut and where the whole log is.
const MaxAgentLog = 64 << 10

// The workflow keeps the last logRingCount logs, at most logRingBytes of
// them in all, for its status query, and carries them across
// Continue-As-New: an attached aot run fetches them every half second; a
// client that asks less often than that many attempts take misses the
// oldest.
const (
	logRingCount = 64
	logRingBytes = 512 << 10
)

// logMark is where an agent's log file on this worker ended before the
// agent ran.
type logMark struct {
	path string
	off  int64
}

// markLog notes the end of the log dir/name (0 when there is none yet).
func markLog(dir, name string) logMark {
	m := logMark{path: filepath.Join(dir, name)}
	if fi, err := os.Stat(m.path); err == nil {
		m.off = fi.Size()
	}
	return m
}

// markAttemptLog marks the log of the agent of an attempt's task.
func markAttemptLog(dirs AgentDirs, atom, role string, attempt int) logMark {
	return markLog(dirs.Logs, loghist.LogName(atom, role, attempt))
}

// since returns what was appended to the log after the mark, nil when
// nothing was: at most MaxAgentLog bytes, the end, after a line saying
// how much was cut, from the start of a line when one starts in the last
// MaxAgentLog bytes. A log shorter than the mark (replaced meanwhile) is
// read from its start.
func (m logMark) since(worker string) *AgentLog {
	f, err := os.Open(m.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	off := m.off
	if fi.Size() < off {
		off = 0
	}
	total := fi.Size() - off
	if total <= 0 {
		return nil
	}
	start := off + max(0, total-MaxAgentLog)
	data := make([]byte, fi.Size()-start)
	n, err := f.ReadAt(data, start)
	if err != nil && err != io.EOF {
		return nil
	}
	data = data[:n]
	head := ""
	if start > off {
		// Cut: from the next line's start, or the next character's.
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i+1 < len(data) {
			data = data[i+1:]
		} else {
			for len(data) > 0 && !utf8.RuneStart(data[0]) {
				data = data[1:]
			}
		}
		cut := total - int64(len(data))
		head = fmt.Sprintf("[aot: the first %d bytes of what the agent printed here are cut; the last %d follow; the whole log is %s on worker %s]\n",
			cut, len(data), m.path, worker)
	}
	return &AgentLog{Name: filepath.Base(m.path), Text: head + string(data)}
}

// keepLog numbers an activity's log and keeps it for the status query,
// dropping the oldest beyond logRingCount and logRingBytes (the newest is
// always kept: it is at most MaxAgentLog and a line).
func (l *loop) keepLog(lg *AgentLog) {
	if lg == nil || lg.Text == "" || lg.Name == "" {
		return
	}
	l.logSeq++
	l.logs = append(l.logs, AgentLog{Seq: l.logSeq, Name: lg.Name, Text: lg.Text})
	size := 0
	for _, g := range l.logs {
		size += len(g.Text)
	}
	for len(l.logs) > 1 && (len(l.logs) > logRingCount || size > logRingBytes) {
		size -= len(l.logs[0].Text)
		l.logs = slices.Delete(l.logs, 0, 1)
	}
}

// keepJudgeLogs keeps a verification's judge logs, in the order of their
// names.
func (l *loop) keepJudgeLogs(logs map[string]string) {
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		l.keepLog(&AgentLog{Name: name, Text: logs[name]})
	}
}

// logsAfter is what the status query gives of the logs: those numbered
// after since.
func (l *loop) logsAfter(since int) []AgentLog {
	i := len(l.logs)
	for i > 0 && l.logs[i-1].Seq > since {
		i--
	}
	if i == len(l.logs) {
		return nil
	}
	return slices.Clone(l.logs[i:])
}

// The client's side.

func logSeqPath(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "temporal.logseq")
}

// logsSeen is the number of the last agent's log appended to the local
// logs folder (0: none, or the marker was not read from a state file).
func (m Marker) logsSeen() int {
	if m.stateFile == "" {
		return 0
	}
	return readSeq(logSeqPath(m.stateFile))
}

// readSeq reads a number kept in a file (0 when there is none).
func readSeq(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}

// appendLogs appends st's agents' logs after the last one appended to the
// logs of the same names in the state file's logs folder, where a local
// run keeps them and aot logs reads them; the file temporal.logseq beside
// the journal keeps the number of the last one, so none is appended
// twice. A name that is not a log file's (a path, from a worker that is
// not aot's) is made one (logFileName): nothing is written outside the
// folder, and nothing is lost.
func appendLogs(stateFile string, st Status) error {
	seqFile := logSeqPath(stateFile)
	last := readSeq(seqFile)
	if st.LogSeq < last {
		last = 0 // a new loop of the same workflow id
	}
	if st.LogSeq == last {
		return nil
	}
	dir := loghist.LogDir(stateFile)
	for _, lg := range st.Logs {
		if lg.Seq <= last {
			continue
		}
		if err := os.MkdirAll(dir, journal.DirMode); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(dir, logFileName(lg.Name)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, journal.FileMode)
		if err != nil {
			return err
		}
		_, err = f.WriteString(lg.Text)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return state.WriteFile(seqFile, []byte(strconv.Itoa(st.LogSeq)+"\n"), journal.FileMode)
}

// logFileName is name as a file of the logs folder: one name (no folder),
// not hidden, ending in .log. The names aot's workers give
// (history.LogName) are kept as they are.
func logFileName(name string) string {
	name = loghist.SafeName(name)
	if name == "" || strings.HasPrefix(name, ".") {
		name = "_" + name
	}
	if !strings.HasSuffix(name, ".log") {
		name += ".log"
	}
	return name
}
