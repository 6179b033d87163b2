// Package history reads what happened in a loop from its journal and the
// agents' log files: every attempt of an agent on an atom, its outcome and
// where its output is. aot logs, aot status and the server read it.
package history

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/journal"
)

// LogDir is where the agents' output of stateFile's loop is kept.
func LogDir(stateFile string) string { return filepath.Join(journal.DirFor(stateFile), "logs") }

// LogName is the log file name of one attempt.
// A run of no atom (aot align's model) is ROLE-N.log: a name never starts
// with "-".
func LogName(atom, role string, attempt int) string {
	if atom == "" {
		return fmt.Sprintf("%s-%d.log", role, attempt)
	}
	return fmt.Sprintf("%s-%s-%d.log", SafeName(atom), role, attempt)
}

// SafeName keeps an atom id usable as part of a file name.
func SafeName(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || r < ' ' {
			return '_'
		}
		return r
	}, id)
}

// Roles are the roles whose runs have logs.
var Roles = []string{string(agent.Worker), string(agent.Probe), string(agent.Planner), string(agent.Judge)}

// Attempt is one run of an agent on an atom and what it printed.
type Attempt struct {
	Atom       string     `json:"atom"`
	Role       string     `json:"role"`
	Attempt    int        `json:"attempt"`
	Outcome    string     `json:"outcome"` // ok, failed, reset, running, unfinished, unknown
	Reason     string     `json:"reason,omitempty"`
	Started    *time.Time `json:"started,omitempty"`
	DurationMS int64      `json:"duration_ms,omitempty"`
	LogFile    string     `json:"log_file"`
	Log        string     `json:"log"` // filled by readers that show it
}

func (a *Attempt) key() string { return a.Atom + "\x00" + a.Role + "\x00" + strconv.Itoa(a.Attempt) }

// Book collects the attempts of a journal as its events come.
type Book struct {
	logDir string
	byKey  map[string]*Attempt
	order  []*Attempt
}

// NewBook starts an empty book for stateFile's loop.
func NewBook(stateFile string) *Book {
	return &Book{logDir: LogDir(stateFile), byKey: map[string]*Attempt{}}
}

// Attempts are the attempts seen so far, in order of first appearance.
func (b *Book) Attempts() []*Attempt { return b.order }

func (b *Book) logFile(atom, role string, attempt int) string {
	return filepath.Join(b.logDir, LogName(atom, role, attempt))
}

func (b *Book) get(atom, role string, attempt int) (*Attempt, bool) {
	a := &Attempt{Atom: atom, Role: role, Attempt: attempt}
	if old, ok := b.byKey[a.key()]; ok {
		return old, false
	}
	a.LogFile = b.logFile(atom, role, attempt)
	b.byKey[a.key()] = a
	b.order = append(b.order, a)
	return a, true
}

// attemptOf is the attempt number an event is about. The base case's
// planner is journaled without one (its log is numbered by iteration) and
// its judges too (their log is attempt 1).
func attemptOf(ev journal.Event) int {
	if ev.Attempt > 0 || ev.Atom != "base_case" {
		return ev.Attempt
	}
	if ev.Role == string(agent.Planner) {
		return ev.Iteration + 1
	}
	return 1
}

// Add takes one event into the book and returns the attempt it changed.
func (b *Book) Add(ev journal.Event) *Attempt {
	switch ev.Type {
	case journal.AtomStart:
		if ev.Role == "" {
			return nil
		}
		a, _ := b.get(ev.Atom, ev.Role, attemptOf(ev))
		t := ev.Time
		a.Started = &t
		a.Outcome, a.Reason, a.DurationMS = "running", "", 0
		return a
	case journal.AtomFinish:
		if ev.Role == "" || ev.IsReplayed() {
			return nil
		}
		a, _ := b.get(ev.Atom, ev.Role, attemptOf(ev))
		a.DurationMS = ev.DurationMS
		a.Outcome, a.Reason = "failed", ev.Reason
		if ev.OK != nil && *ev.OK {
			a.Outcome = "ok"
			if ev.Role != string(agent.Judge) {
				a.Reason = ""
			}
		}
		return a
	case journal.AtomReset:
		// With a role and attempt: a run killed or sent back; without: an
		// atom orphaned by an engine that died, its latest run unfinished.
		var a *Attempt
		if ev.Role != "" {
			a = b.byKey[(&Attempt{Atom: ev.Atom, Role: ev.Role, Attempt: ev.Attempt}).key()]
		} else {
			for i := len(b.order) - 1; i >= 0; i-- {
				if b.order[i].Atom == ev.Atom {
					a = b.order[i]
					break
				}
			}
		}
		if a == nil || a.Outcome != "running" {
			return nil
		}
		a.Outcome, a.Reason = "reset", ev.Reason
		return a
	case journal.Stop, journal.RunStart, journal.RunResume:
		// Whatever still runs has no outcome any more.
		for _, a := range b.order {
			if a.Outcome == "running" {
				a.Outcome = "unfinished"
				a.Reason = "its engine ended before it did"
			}
		}
	}
	return nil
}

// AddOrphanLogs adds the log files the journal does not name (a journal
// deleted or cut), ordered by modification time.
func (b *Book) AddOrphanLogs() {
	entries, err := os.ReadDir(b.logDir)
	if err != nil {
		return
	}
	known := map[string]bool{}
	for _, a := range b.order {
		known[filepath.Base(a.LogFile)] = true
	}
	type orphan struct {
		a   *Attempt
		mod time.Time
	}
	var orphans []orphan
	for _, e := range entries {
		name := e.Name()
		if known[name] || !e.Type().IsRegular() {
			continue
		}
		atom, role, n, ok := parseLogName(name)
		if !ok {
			continue
		}
		var mod time.Time
		if fi, err := e.Info(); err == nil {
			mod = fi.ModTime()
		}
		a := &Attempt{Atom: atom, Role: role, Attempt: n, Outcome: "unknown", Reason: "not in the journal", LogFile: filepath.Join(b.logDir, name)}
		orphans = append(orphans, orphan{a, mod})
	}
	sort.SliceStable(orphans, func(i, j int) bool { return orphans[i].mod.Before(orphans[j].mod) })
	for _, o := range orphans {
		b.byKey[o.a.key()] = o.a
		b.order = append(b.order, o.a)
	}
}

// parseLogName splits ATOM-ROLE-N.log.
func parseLogName(name string) (atom, role string, n int, ok bool) {
	base, found := strings.CutSuffix(name, ".log")
	if !found {
		return "", "", 0, false
	}
	i := strings.LastIndexByte(base, '-')
	if i < 0 {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(base[i+1:])
	if err != nil || n < 0 {
		return "", "", 0, false
	}
	base = base[:i]
	for _, r := range Roles {
		if a, found := strings.CutSuffix(base, "-"+r); found && a != "" {
			return a, r, n, true
		}
	}
	return "", "", 0, false
}
