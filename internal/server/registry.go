package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/ccw"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/local"
	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
)

// loop is one served loop: its identity, its journal as read so far, and
// the bookkeeping of its CCW view.
type loop struct {
	id, title, description string
	titleFromGoal          bool // the title is the goal's first line: it follows a redirect of the goal
	workspace, stateFile   string
	created                time.Time
	reg                    *registry
	journal                string // as found when the loop was added

	mu           sync.Mutex
	events       []journal.Event // the journal so far; seq n is events[n-1]
	fol          *journal.Follower
	stamp        fileStamp         // the state file when last looked at
	journalStamp fileStamp         // the journal when last read
	dirty        bool              // the CCW view is behind
	viewStamp    fileStamp         // {id}.json as last written; !ok until a write succeeds
	reported     map[string]string // what is wrong with the loop's files, by source, as last said
	child        *child            // the aot run this server started, if any
	outputs      map[string]string // the last verification's check outputs
	outputsSeq   int               // the journal sequence of that verification
	startMu      sync.Mutex
	viewMu       sync.Mutex // one writer of the CCW view at a time
	sum          *summaryDoc
	sumKey       summaryKey

	// On Temporal (temporal.go): what the workflow said when last asked.
	syncMu  sync.Mutex // one question to the workflow at a time
	wf      *Workflow
	wfAt    time.Time
	wfErr   string    // the last question's error, reported once
	wfEnded fileStamp // the marker when the workflow was seen ended
}

type fileStamp struct {
	size int64
	mod  time.Time
	mode fs.FileMode // a chmod changes what can be read, not the time
	ok   bool
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime(), mode: fi.Mode(), ok: true}
}

// snapshot returns the events read so far (the slice is never mutated in
// place, so it may be read without the lock).
func (l *loop) snapshot() []journal.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events[:len(l.events):len(l.events)]
}

// engineInfo is what the run lock and the pause marker say or, for a loop
// on Temporal, its workflow.
type engineInfo struct {
	Running     bool          `json:"running"`
	PID         int           `json:"pid,omitempty"`
	Paused      bool          `json:"paused"`
	PausedSince *time.Time    `json:"paused_since,omitempty"`
	PausedKill  bool          `json:"paused_kill,omitempty"`
	Temporal    *workflowInfo `json:"temporal,omitempty"`
}

func (l *loop) engine() engineInfo {
	if _, err := l.checked(); err != nil {
		return engineInfo{}
	}
	return l.engineChecked()
}

// engineChecked is engine for a loop whose paths were just checked.
func (l *loop) engineChecked() engineInfo {
	pid, held, _ := runlock.Holder(l.stateFile)
	info := engineInfo{Running: held}
	if held {
		info.PID = pid
	}
	if wf, at := l.workflow(); wf != nil {
		// The workflow is the engine, whether or not an aot run is attached
		// to it (the run lock's pid).
		info.Running = held || wf.Running
		info.Paused = info.Running && wf.Paused
		if info.Paused {
			info.PausedSince, info.PausedKill = wf.PausedSince, wf.PausedKill
		}
		info.Temporal = &workflowInfo{WorkflowID: wf.ID, AskedAt: at}
		return info
	}
	if held {
		if p, ok := local.Paused(l.stateFile); ok {
			info.Paused, info.PausedSince, info.PausedKill = true, &p.Since, p.Kill
		}
	}
	return info
}

// registry holds the loops of the served workspaces.
type registry struct {
	workspaces []string // absolute, as served
	roots      []string // the same, their links resolved
	log        *slog.Logger
	hub        *hub
	now        func() time.Time

	mu    sync.RWMutex
	loops map[string]*loop
}

// loopsDir is a workspace's CCW folder.
func loopsDir(ws string) string { return filepath.Join(ws, ".loop") }

// ownLoops holds the folders of the loops created by the server, one each.
func ownLoops(ws string) string { return filepath.Join(ws, ".claude", "aot-loops") }

// ownStateFile is where a loop created by the server keeps its state file.
func ownStateFile(ws, id string) string {
	return filepath.Join(ownLoops(ws), id, filepath.Base(state.DefaultPath))
}

func (r *registry) get(id string) *loop {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.loops[id]
}

func (r *registry) all() []*loop {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*loop, 0, len(r.loops))
	for _, l := range r.loops {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].created.Equal(out[j].created) {
			return out[i].created.After(out[j].created)
		}
		return out[i].id < out[j].id
	})
	return out
}

func (r *registry) add(l *loop) {
	l.reg = r
	l.reported = map[string]string{}
	l.journal = journal.PathFor(l.stateFile)
	l.fol = journal.NewFollower(l.journal)
	l.dirty = true
	r.mu.Lock()
	r.loops[l.id] = l
	r.mu.Unlock()
}

// discover finds the loops of every workspace: those with a CCW view, those
// the server created (their state files), and the workspace's own state
// file, which becomes a loop with no extra step.
func (r *registry) discover() error {
	for _, ws := range r.workspaces {
		known := map[string]bool{} // state files already a loop
		ids := map[string]bool{}
		if entries, err := os.ReadDir(loopsDir(ws)); err == nil {
			for _, e := range entries {
				id, ok := strings.CutSuffix(e.Name(), ".json")
				if ok && validID(id) {
					ids[id] = true
				}
				if id, ok := strings.CutSuffix(e.Name(), ".progress"); ok && e.IsDir() && validID(id) {
					ids[id] = true
				}
			}
		}
		if entries, err := os.ReadDir(ownLoops(ws)); err == nil {
			for _, e := range entries {
				if e.IsDir() && validID(e.Name()) {
					ids[e.Name()] = true
				}
			}
		}
		for id := range ids {
			l, err := r.open(ws, id)
			if err != nil {
				r.log.Warn("a loop could not be read", "workspace", ws, "loop", id, "error", err)
				continue
			}
			known[l.stateFile] = true
			r.add(l)
		}
		def := filepath.Join(ws, state.DefaultPath)
		if _, err := os.Lstat(def); err == nil && !known[def] {
			created := r.now()
			l := &loop{id: idFor(def, created), workspace: ws, stateFile: def, created: created}
			st, evs := r.peek(def)
			if len(evs) > 0 {
				l.created = evs[0].Time
				l.id = idFor(def, l.created)
			}
			if st != nil {
				l.title, l.titleFromGoal = dag.OneLine(st.Objective.Goal, 80), true
				l.description = dag.OneLine(st.Objective.BackgroundIntent, 400)
			}
			r.add(l)
		}
	}
	return nil
}

// open reads a loop known by its id: its identity from the CCW view or,
// when that is damaged or missing, from the progress files and the journal.
func (r *registry) open(ws, id string) (*loop, error) {
	// The view is read only inside the workspace, as the state is.
	for _, p := range []string{loopsDir(ws), ccw.DocPath(loopsDir(ws), id), ccw.ProgressDir(loopsDir(ws), id)} {
		if err := r.within(p); err != nil {
			return nil, err
		}
	}
	sf := ownStateFile(ws, id)
	if _, err := os.Lstat(sf); err != nil {
		sf = filepath.Join(ws, state.DefaultPath)
	}
	st, evs := r.peek(sf)
	m, rebuilt, err := readMeta(loopsDir(ws), id, sf, st, evs)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(m.StateFile) {
		m.StateFile = filepath.Join(ws, m.StateFile)
	}
	// The view may name any path: it is kept, and checked at every use.
	l := &loop{id: id, title: m.Title, description: m.Description, workspace: ws, stateFile: filepath.Clean(m.StateFile), created: m.CreatedAt}
	if rebuilt {
		r.notice(l, fmt.Sprintf("%s was damaged or missing: rebuilt from %s.progress/ and the journal", filepath.Join(loopsDir(ws), id+".json"), id))
	}
	return l, nil
}

// peek reads a state file and its journal when both are inside a served
// workspace; nil otherwise.
func (r *registry) peek(sf string) (*state.State, []journal.Event) {
	if _, err := (&loop{stateFile: sf, reg: r}).checked(); err != nil {
		return nil, nil
	}
	st, _ := state.NewStore(sf).Read()
	evs, _, _ := journal.Scan(journal.PathFor(sf))
	return st, evs
}

func (r *registry) notice(l *loop, msg string) {
	r.log.Warn(msg, "loop", l.id)
	r.hub.publish(message{loop: l.id, kind: "notice", data: mustJSON(map[string]any{"loop_id": l.id, "message": msg})})
}

// claim picks a new loop's id in ws and makes its own folder: each loop
// created in a workspace has a folder, a state file and a journal of its
// own, however many share the workspace.
func (r *registry) claim(ws string, now time.Time) (id, stateFile string, err error) {
	parent := ownLoops(ws)
	if err := r.within(parent); err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", "", err
	}
	for range 10 {
		id = newID(now, rand.Reader)
		sf := ownStateFile(ws, id)
		if r.get(id) != nil {
			continue
		}
		// Mkdir, not MkdirAll: a folder already there is another loop's.
		if err := os.Mkdir(filepath.Dir(sf), 0o755); errors.Is(err, fs.ErrExist) {
			continue
		} else if err != nil {
			return "", "", err
		}
		return id, sf, nil
	}
	return "", "", errors.New("no free loop id after 10 tries")
}

// workspaceFor picks a served workspace: the first when none is named.
func (r *registry) workspaceFor(name string) (string, error) {
	if name == "" {
		return r.workspaces[0], nil
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return "", err
	}
	if slices.Contains(r.workspaces, abs) {
		return abs, nil
	}
	return "", errors.New("workspace " + name + " is not served (aot serve --workspace DIR adds one)")
}
