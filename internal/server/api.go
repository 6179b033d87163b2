package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/ccw"
	"github.com/aot-loop/aot/internal/control"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

const maxBody = 1 << 20

func (s *Server) routes() {
	m := http.NewServeMux()
	static := http.FileServerFS(s.staticFS())
	m.Handle("/", s.index(static))
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such route: %s %s (see docs/API.md)", r.Method, r.URL.Path)
	})
	route := func(pattern, method string, h func(http.ResponseWriter, *http.Request)) {
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
				w.Header().Set("Allow", method)
				writeError(w, http.StatusMethodNotAllowed, "%s %s: use %s", r.Method, r.URL.Path, method)
				return
			}
			h(w, r)
		})
	}
	route("/api/health", http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]bool{"ok": true})
	})
	m.HandleFunc("/api/loops", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			s.listLoops(w, r)
		case http.MethodPost:
			s.createLoop(w, r)
		default:
			w.Header().Set("Allow", "GET, POST")
			writeError(w, http.StatusMethodNotAllowed, "%s /api/loops: use GET or POST", r.Method)
		}
	})
	route("/api/stream", http.MethodGet, func(w http.ResponseWriter, r *http.Request) { s.stream(w, r, nil) })
	loopRoute := func(sub, method string, h func(http.ResponseWriter, *http.Request, *loop)) {
		route("/api/loops/{id}"+sub, method, func(w http.ResponseWriter, r *http.Request) {
			l := s.reg.get(r.PathValue("id"))
			if l == nil {
				writeError(w, http.StatusNotFound, "no loop %q", r.PathValue("id"))
				return
			}
			if _, err := l.checked(); err != nil {
				stateError(w, err)
				return
			}
			h(w, r, l)
		})
	}
	loopRoute("", http.MethodGet, s.getLoop)
	loopRoute("/start", http.MethodPost, s.startLoop)
	loopRoute("/pause", http.MethodPost, s.pauseLoop)
	loopRoute("/resume", http.MethodPost, s.resumeLoop)
	loopRoute("/stop", http.MethodPost, s.stopLoop)
	loopRoute("/redirect", http.MethodPost, s.redirectLoop)
	loopRoute("/graph", http.MethodGet, s.graph)
	loopRoute("/atoms", http.MethodGet, s.atoms)
	loopRoute("/atoms/{atom}", http.MethodGet, s.atom)
	loopRoute("/attempts", http.MethodGet, s.attempts)
	loopRoute("/output", http.MethodGet, s.output)
	loopRoute("/events", http.MethodGet, s.events)
	loopRoute("/costs", http.MethodGet, s.costs)
	loopRoute("/checklist", http.MethodGet, s.checklist)
	loopRoute("/stream", http.MethodGet, func(w http.ResponseWriter, r *http.Request, l *loop) { s.stream(w, r, l) })
	s.mux = m
}

// decode reads a JSON body: JSON only, bounded, no unknown fields, one
// document. An empty body is an empty object.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength != 0 {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
			return false
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "the body is larger than %d bytes", maxBody)
			return false
		}
		writeError(w, http.StatusBadRequest, "reading the body: %v", err)
		return false
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "bad JSON body: %v", err)
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "bad JSON body: more than one document")
		return false
	}
	return true
}

// --- summaries ---

type progressDoc struct {
	Total      int `json:"total"`
	Resolved   int `json:"resolved"`
	InProgress int `json:"in_progress"`
	Pending    int `json:"pending"`
	Executable int `json:"executable"`
	// SetAside: OR choices the loop will not run (they failed, or another
	// choice of their group is selected); they are among Pending.
	SetAside int `json:"set_aside"`
	// Settled is Resolved plus SetAside, Percent its share of Total: 100
	// when the loop completed.
	Settled int `json:"settled"`
	Percent int `json:"percent"`
}

type runningDoc struct {
	Atom    string     `json:"atom"`
	Role    string     `json:"role"`
	Attempt int        `json:"attempt"`
	Started *time.Time `json:"started,omitempty"`
}

type summaryDoc struct {
	LoopID        string      `json:"loop_id"`
	Title         string      `json:"title"`
	Description   string      `json:"description"`
	Workspace     string      `json:"workspace"`
	StateFile     string      `json:"state_file"`
	Status        string      `json:"status"`
	Goal          string      `json:"goal"`
	Engine        engineInfo  `json:"engine"`
	Progress      progressDoc `json:"progress"`
	Iteration     int         `json:"iteration"`
	MaxIterations int         `json:"max_iterations"`
	// CurrentIteration is the sweep under way while the loop runs or is
	// paused (sweeps done + 1, at most max_iterations), else the sweeps done.
	CurrentIteration int           `json:"current_iteration"`
	StartedAt        *time.Time    `json:"started_at,omitempty"` // the first run's start, from the journal
	EndedAt          *time.Time    `json:"ended_at,omitempty"`   // the last event of a loop that is not running
	StopReason       string        `json:"stop_reason,omitempty"`
	Usage            history.Spend `json:"usage"`
	Running          []runningDoc  `json:"running"`
	CreatedAt        time.Time     `json:"created_at"`
	UpdatedAt        *time.Time    `json:"updated_at,omitempty"`
	Error            string        `json:"error,omitempty"` // the state file cannot be read
	CCW              any           `json:"ccw,omitempty"`
	Trail            []trailDoc    `json:"trail,omitempty"`
	Corrections      []correctDoc  `json:"corrections,omitempty"`

	// Bounds are the loop's limits that are set, with what is used of each
	// and what is left.
	Bounds []boundDoc `json:"bounds"`

	st       *state.State // the control fields the status is computed from
	limits   state.Constraints
	runStart *time.Time    // the latest run's start: max_wall_time counts from it
	runPause time.Duration // paused since then, not charged to max_wall_time
	attempts int           // the most failed attempts of one atom
}

// boundDoc is one limit of the loop: max_cost_usd in dollars,
// max_wall_time in milliseconds of the latest run, the others in counts.
type boundDoc struct {
	Name  string  `json:"name"`
	Limit float64 `json:"limit"`
	Used  float64 `json:"used"`
	Left  float64 `json:"left"`
}

type trailDoc struct {
	ORGroup   string `json:"or_group"`
	Selected  string `json:"selected"`
	Reason    string `json:"reason"`
	Timestamp string `json:"timestamp"`
}

type correctDoc struct {
	Timestamp    string `json:"timestamp"`
	Type         string `json:"type"`
	Description  string `json:"description"`
	TrailCleared bool   `json:"trail_cleared"`
}

// summary is the loop's card. What comes from the journal and the state
// file is computed again only when either changed; the engine's state is
// looked at every time.
func (s *Server) summary(l *loop) summaryDoc {
	var eng engineInfo
	var stamp fileStamp
	if sf, err := l.checked(); err == nil {
		eng, stamp = l.engineChecked(), stampOf(sf)
	}
	evs := l.snapshot()
	key := summaryKey{events: len(evs), state: stamp, running: eng.Running}
	l.mu.Lock()
	c, ok := l.sum, l.sumKey == key && l.sum != nil
	l.mu.Unlock()
	if !ok {
		c = s.computeSummary(l, evs, eng.Running)
		if c.Error == "" { // a state that cannot be read may be mended with its times unchanged (a chmod)
			l.mu.Lock()
			l.sum, l.sumKey = c, key
			l.mu.Unlock()
		}
	}
	d := *c
	d.Engine = eng
	if wf, _ := l.workflow(); wf != nil {
		// A workflow's attempts run on its workers: their journal is not here.
		d.Running = []runningDoc{}
		for _, a := range wf.Attempts {
			d.Running = append(d.Running, runningDoc{Atom: a.Atom, Role: "worker", Attempt: a.Attempt, Started: &a.Started})
		}
	}
	if d.st != nil {
		d.Status = loopStatus(d.st, eng)
	}
	d.Bounds = bounds(&d, time.Now())
	d.CurrentIteration = d.Iteration
	if d.Status == "running" || d.Status == "paused" {
		if d.CurrentIteration++; d.MaxIterations > 0 && d.CurrentIteration > d.MaxIterations {
			d.CurrentIteration = d.MaxIterations
		}
	} else if d.StartedAt != nil {
		d.EndedAt = d.UpdatedAt
	}
	return d
}

type summaryKey struct {
	events  int
	state   fileStamp
	running bool
}

func (s *Server) computeSummary(l *loop, evs []journal.Event, running bool) *summaryDoc {
	d := &summaryDoc{LoopID: l.id, Title: l.title, Description: l.description, Workspace: l.workspace,
		StateFile: l.stateFile, CreatedAt: l.created, Running: []runningDoc{}}
	d.Usage = history.SpendOf(evs).Total
	if len(evs) > 0 {
		t := evs[len(evs)-1].Time
		d.UpdatedAt = &t
	}
	for i := range evs {
		switch evs[i].Type {
		case journal.RunStart, journal.RunResume:
			t := evs[i].Time
			if d.StartedAt == nil {
				d.StartedAt = &t
			}
			d.runStart, d.runPause = &t, 0
		case journal.Resume:
			d.runPause += time.Duration(journal.DataOf[journal.ResumeData](evs[i]).PausedMS) * time.Millisecond
		}
	}
	if running {
		book := history.NewBook(l.stateFile)
		for _, ev := range evs {
			book.Add(ev)
		}
		for _, a := range book.Attempts() {
			if a.Outcome == "running" {
				d.Running = append(d.Running, runningDoc{Atom: a.Atom, Role: a.Role, Attempt: a.Attempt, Started: a.Started})
			}
		}
	}
	st, rep, err := l.readReport()
	if err != nil {
		d.Status = "failed"
		d.Error = err.Error()
		return d
	}
	d.st = &state.State{Control: st.Control}
	d.Goal = st.Objective.Goal
	if l.titleFromGoal {
		d.Title = dag.OneLine(st.Objective.Goal, 80)
	}
	// The state file counts the sweeps at their end; the journal's
	// iteration events may be ahead of it between two checkpoints.
	d.Iteration = st.Control.Iteration
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == journal.Iteration {
			d.Iteration = max(d.Iteration, evs[i].Iteration)
			break
		}
	}
	d.MaxIterations = st.Objective.Constraints.MaxIterations
	if st.Control.StopReason != nil {
		d.StopReason = *st.Control.StopReason
	}
	d.Progress = progressOf(st)
	d.limits = st.Objective.Constraints
	for i := range st.Atoms {
		d.attempts = max(d.attempts, st.Atoms[i].Attempts)
	}
	if !rep.Valid() {
		// A file that does not validate is a broken loop, not a stopped
		// one: said, with its first error (aot validate lists them all).
		d.Status, d.st = "failed", nil
		d.Error = fmt.Sprintf("the state file does not validate (%s); aot validate lists every error", rep.Errors[0])
	}
	return d
}

// bounds lists the limits set on the loop with their use so far.
func bounds(d *summaryDoc, now time.Time) []boundDoc {
	out := []boundDoc{}
	add := func(name string, limit, used float64) {
		if limit > 0 {
			out = append(out, boundDoc{Name: name, Limit: limit, Used: used, Left: max(0, limit-used)})
		}
	}
	k := d.limits
	stall := 0
	if d.st != nil {
		stall = d.st.Control.StallCount
	}
	add("max_iterations", float64(k.MaxIterations), float64(d.Iteration))
	add("max_cost_usd", k.MaxCostUSD, d.Usage.CostUSD)
	add("max_tokens", float64(k.MaxTokens), float64(d.Usage.Tokens))
	if wall, err := state.ParseDuration(k.MaxWallTime); err == nil && wall > 0 {
		var used time.Duration
		if d.runStart != nil {
			end := now
			if !d.Engine.Running && d.UpdatedAt != nil {
				end = *d.UpdatedAt
			}
			used = max(0, end.Sub(*d.runStart)-d.runPause)
		}
		add("max_wall_time", float64(wall.Milliseconds()), float64(used.Milliseconds()))
	}
	add("max_stall_count", float64(k.MaxStallCount), float64(stall))
	add("max_attempts_per_atom", float64(k.MaxAttemptsPerAtom), float64(d.attempts))
	add("max_parallel_agents", float64(k.MaxParallelAgents), float64(len(d.Running)))
	return out
}

// progressOf counts the atoms by status. An OR choice that failed, or
// whose group selected another choice, is set aside: the loop is done
// without it, so it counts as settled and a completed loop reads 100%.
func progressOf(st *state.State) progressDoc {
	var p progressDoc
	groups := map[string]*state.ORGroup{}
	for i := range st.ORGroups {
		groups[st.ORGroups[i].Name] = &st.ORGroups[i]
	}
	for i := range st.Atoms {
		a := &st.Atoms[i]
		switch a.Status {
		case state.StatusResolved:
			p.Resolved++
		case state.StatusInProgress:
			p.InProgress++
		default:
			p.Pending++
			if g := groups[a.ORGroup]; g != nil && (slices.Contains(g.Failed, a.ID) || (g.Selected != "" && g.Selected != a.ID)) {
				p.SetAside++
			}
		}
	}
	p.Total = len(st.Atoms)
	p.Executable = len(dag.Executable(st, 0))
	p.Settled = p.Resolved + p.SetAside
	if p.Total > 0 {
		p.Percent = p.Settled * 100 / p.Total
	}
	return p
}

// loopStatus is the CCW status of a loop: ccw's mapping of the state, with
// what only the run lock tells (a loop marked running whose engine is gone
// has failed).
func loopStatus(st *state.State, e engineInfo) string {
	if !e.Running && st.Control.Status == state.ControlRunning {
		return ccw.StatusFailed
	}
	if e.Running {
		st = &state.State{Control: st.Control}
		st.Control.Status = state.ControlRunning
	}
	status, _ := ccw.StatusOf(st, e.Paused, nil)
	return status
}

func (s *Server) listLoops(w http.ResponseWriter, r *http.Request) {
	out := []summaryDoc{}
	for _, l := range s.reg.all() {
		out = append(out, s.summary(l))
	}
	writeJSON(w, 200, map[string]any{"loops": out})
}

func (s *Server) getLoop(w http.ResponseWriter, r *http.Request, l *loop) {
	st, err := l.read()
	if err != nil {
		stateError(w, err)
		return
	}
	d := s.summary(l)
	if v, err := s.buildView(l); err == nil {
		d.CCW = v
	}
	d.Trail, d.Corrections = []trailDoc{}, []correctDoc{}
	for _, t := range st.Trail {
		d.Trail = append(d.Trail, trailDoc{ORGroup: t.ORGroup, Selected: t.Selected, Reason: t.Reason, Timestamp: t.Timestamp})
	}
	for _, c := range st.Corrections {
		d.Corrections = append(d.Corrections, correctDoc{Timestamp: c.Timestamp, Type: c.Type, Description: c.Description, TrailCleared: c.TrailCleared})
	}
	writeJSON(w, 200, d)
}

// --- create ---

type checkSpec struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Value   string `json:"value"`
	Timeout string `json:"timeout,omitempty"`
}

type atomSpec struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	DependsOn   []string `json:"depends_on,omitempty"`
}

type constraintsSpec struct {
	MaxIterations      int     `json:"max_iterations,omitempty"`
	MaxParallelAgents  int     `json:"max_parallel_agents,omitempty"`
	MaxStallCount      int     `json:"max_stall_count,omitempty"`
	MaxWallTime        string  `json:"max_wall_time,omitempty"`
	MaxCostUSD         float64 `json:"max_cost_usd,omitempty"`
	MaxTokens          int64   `json:"max_tokens,omitempty"`
	MaxAttemptsPerAtom int     `json:"max_attempts_per_atom,omitempty"`
}

type createRequest struct {
	Title            string           `json:"title"`
	Description      string           `json:"description"`
	Workspace        string           `json:"workspace,omitempty"`
	State            string           `json:"state,omitempty"`
	Goal             string           `json:"goal,omitempty"`
	Background       string           `json:"background,omitempty"`
	Deliverables     string           `json:"deliverables,omitempty"`
	DefinitionOfDone string           `json:"definition_of_done,omitempty"`
	Checks           []checkSpec      `json:"checks,omitempty"`
	Atoms            []atomSpec       `json:"atoms,omitempty"`
	Constraints      *constraintsSpec `json:"constraints,omitempty"`
	Start            *startRequest    `json:"start,omitempty"`
}

func (q *createRequest) build() (*state.State, error) {
	if q.State != "" {
		if q.Goal != "" || len(q.Checks)+len(q.Atoms) > 0 || q.Constraints != nil {
			return nil, errors.New("state: give either a whole state file or the objective fields, not both")
		}
		st, err := state.Parse([]byte(q.State))
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		return st, nil
	}
	if strings.TrimSpace(q.Goal) == "" {
		return nil, errors.New("goal: required (or a whole state file in state)")
	}
	if len(q.Checks) == 0 {
		return nil, errors.New("checks: at least one check is the loop's base case")
	}
	var items []state.ChecklistItem
	for i, c := range q.Checks {
		name := c.Name
		if name == "" {
			name = c.Value
		}
		if c.Type == "" || c.Value == "" {
			return nil, fmt.Errorf("checks[%d]: type and value are required", i)
		}
		ch := &state.Check{Type: c.Type, Value: c.Value, Timeout: c.Timeout}
		if c.Type == state.CheckAssertion || c.Type == state.CheckQuality {
			ch.Value, ch.Criteria = "", c.Value
		}
		items = append(items, state.ChecklistItem{Item: name, Check: ch})
	}
	var atoms []state.Atom
	for _, a := range q.Atoms {
		atoms = append(atoms, state.Atom{ID: a.ID, Description: a.Description, DependsOn: a.DependsOn})
	}
	obj := state.Objective{Goal: q.Goal, BackgroundIntent: q.Background, Deliverables: q.Deliverables,
		DefinitionOfDone: q.DefinitionOfDone, BaseCase: &state.BaseCase{Checklist: items, HasChecklist: true}}
	st := state.New(obj, atoms, q.Goal)
	if c := q.Constraints; c != nil {
		k := &st.Objective.Constraints
		set := func(dst *int, v int) {
			if v != 0 {
				*dst = v
			}
		}
		set(&k.MaxIterations, c.MaxIterations)
		set(&k.MaxParallelAgents, c.MaxParallelAgents)
		set(&k.MaxStallCount, c.MaxStallCount)
		set(&k.MaxAttemptsPerAtom, c.MaxAttemptsPerAtom)
		k.MaxWallTime, k.MaxCostUSD, k.MaxTokens = c.MaxWallTime, c.MaxCostUSD, c.MaxTokens
	}
	return st, nil
}

func (s *Server) createLoop(w http.ResponseWriter, r *http.Request) {
	var q createRequest
	if !decode(w, r, &q) {
		return
	}
	if strings.TrimSpace(q.Title) == "" {
		writeError(w, http.StatusBadRequest, "title: required")
		return
	}
	ws, err := s.reg.workspaceFor(q.Workspace)
	if err != nil {
		writeError(w, http.StatusBadRequest, "workspace: %v", err)
		return
	}
	st, err := q.build()
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	// A new loop's atom ids follow the rule a redirect's new atoms do:
	// they name files and folders.
	for i := range st.Atoms {
		if err := state.ValidID(st.Atoms[i].ID); err != nil {
			writeError(w, http.StatusBadRequest, "atoms[%d].id: %v", i, err)
			return
		}
	}
	if q.Start != nil {
		if _, err := q.Start.args(); err != nil {
			writeError(w, http.StatusBadRequest, "start: %v", err)
			return
		}
	}
	now := s.opts.Now()
	id, sf, err := s.reg.claim(ws, now)
	if err != nil {
		s.controlError(w, err)
		return
	}
	if err := state.NewStore(sf).Create(st, false); err != nil {
		_ = os.Remove(dirOf(sf))
		var ve *state.ValidationError
		if errors.As(err, &ve) {
			writeError(w, http.StatusBadRequest, "the loop's state is invalid: %v", err)
			return
		}
		writeError(w, 500, "%v", err)
		return
	}
	l := &loop{id: id, title: strings.TrimSpace(q.Title), description: strings.TrimSpace(q.Description), workspace: ws, stateFile: sf, created: now}
	s.reg.add(l)
	if err := s.writeView(l); err != nil {
		s.log.Warn("CCW view not written", "loop", id, "error", err)
	}
	if q.Start != nil {
		if _, err := s.start(l, *q.Start); err != nil {
			s.controlError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusCreated, s.summary(l))
}

// --- controls ---

// controlError maps a control's error to its status.
func (s *Server) controlError(w http.ResponseWriter, err error) {
	var se *startError
	var ne *engine.ErrNoEngine
	var ve *state.ValidationError
	var re *engine.RefusedError
	var out *outsideError
	var ue *unreadableError
	var nw *control.NoWorkerError
	switch {
	case errors.As(err, &out), errors.As(err, &ue):
		stateError(w, err)
	case errors.As(err, &re):
		writeError(w, http.StatusUnprocessableEntity, "%v", err)
	case errors.As(err, &se):
		writeError(w, se.code, "%s", se.msg)
	case errors.As(err, &ne), errors.Is(err, engine.ErrNotPaused):
		writeError(w, http.StatusConflict, "%v", err)
	case errors.As(err, &ve), errors.Is(err, engine.ErrEmptyChange):
		writeError(w, http.StatusUnprocessableEntity, "%v", err)
	case errors.As(err, &nw):
		// The workflow waits for a worker: what was asked is kept.
		writeError(w, http.StatusServiceUnavailable, "%v", err)
	default:
		writeError(w, http.StatusInternalServerError, "%v", err)
	}
}

func (s *Server) startLoop(w http.ResponseWriter, r *http.Request, l *loop) {
	var q startRequest
	if !decode(w, r, &q) {
		return
	}
	pid, err := s.start(l, q)
	if err != nil {
		s.controlError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"success": true, "pid": pid})
}

type reasonRequest struct {
	Reason string `json:"reason,omitempty"`
	Kill   bool   `json:"kill,omitempty"`
}

func (s *Server) pauseLoop(w http.ResponseWriter, r *http.Request, l *loop) {
	var q reasonRequest
	if !decode(w, r, &q) {
		return
	}
	if q.Reason == "" {
		q.Reason = "paused from aot serve"
	}
	err := s.control(r, l, "pause", func(ctx context.Context, c control.Controller) error {
		return c.Pause(ctx, q.Kill, q.Reason)
	})
	if err != nil {
		s.controlError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"success": true, "paused": true, "kill": q.Kill})
}

func (s *Server) resumeLoop(w http.ResponseWriter, r *http.Request, l *loop) {
	var q reasonRequest
	if !decode(w, r, &q) {
		return
	}
	if q.Kill {
		writeError(w, http.StatusBadRequest, "kill: only pause takes it")
		return
	}
	if q.Reason == "" {
		q.Reason = "resumed from aot serve"
	}
	err := s.control(r, l, "resume", func(ctx context.Context, c control.Controller) error {
		return c.Resume(ctx, q.Reason)
	})
	if err != nil {
		s.controlError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"success": true, "paused": false})
}

func (s *Server) stopLoop(w http.ResponseWriter, r *http.Request, l *loop) {
	var q reasonRequest
	if !decode(w, r, &q) {
		return
	}
	if q.Kill {
		writeError(w, http.StatusBadRequest, "kill: a stop always kills the running agents")
		return
	}
	if q.Reason == "" {
		q.Reason = "stopped from aot serve"
	}
	var res control.StopResult
	err := s.control(r, l, "stop", func(ctx context.Context, c control.Controller) (err error) {
		res, err = c.Stop(ctx, q.Reason)
		return err
	})
	if err != nil {
		s.controlError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"success": true, "status": res.Status, "reason": res.Reason})
}

// redirectRequest is engine.Change with atoms in the API's snake_case.
type redirectRequest struct {
	engine.Change
	AddAtoms []atomSpec `json:"add_atoms,omitempty"`
}

func (s *Server) redirectLoop(w http.ResponseWriter, r *http.Request, l *loop) {
	var q redirectRequest
	if !decode(w, r, &q) {
		return
	}
	c := q.Change
	c.AddAtoms = nil
	for _, a := range q.AddAtoms {
		c.AddAtoms = append(c.AddAtoms, state.Atom{ID: a.ID, Description: a.Description, DependsOn: a.DependsOn, Status: state.StatusPending})
	}
	if strings.TrimSpace(c.Reason) == "" {
		writeError(w, http.StatusBadRequest, "reason: required")
		return
	}
	if c.Empty() {
		writeError(w, http.StatusBadRequest, "%v", engine.ErrEmptyChange)
		return
	}
	var res engine.RedirectResult
	err := s.control(r, l, "redirect", func(ctx context.Context, ctl control.Controller) (err error) {
		res, err = ctl.Redirect(ctx, c)
		return err
	})
	if err != nil {
		s.controlError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"success": true, "applied_by": res.AppliedBy, "corrections": res.Corrections})
}

// --- reads ---

type atomDoc struct {
	ID          string             `json:"id"`
	Description string             `json:"description"`
	Status      string             `json:"status"`
	DependsOn   []string           `json:"depends_on"`
	ORGroup     string             `json:"or_group,omitempty"`
	Executable  bool               `json:"executable"`
	Attempts    int                `json:"attempts"`
	Outcome     string             `json:"outcome,omitempty"`
	Reason      string             `json:"reason,omitempty"`
	Kind        string             `json:"kind,omitempty"`
	Tokens      int64              `json:"tokens"`
	CostUSD     float64            `json:"cost_usd"`
	Binding     *bindingDoc        `json:"binding,omitempty"`
	Runs        []*history.Attempt `json:"runs,omitempty"`
}

type bindingDoc struct {
	Summary   string   `json:"summary"`
	Artifacts []string `json:"artifacts"`
}

func (s *Server) atomDocs(l *loop) ([]atomDoc, map[string][]*history.Attempt, error) {
	st, err := l.read()
	if err != nil {
		return nil, nil, err
	}
	evs := l.snapshot()
	spend := history.SpendOf(evs)
	book := history.NewBook(l.stateFile)
	kinds := map[string]string{}
	for _, ev := range evs {
		book.Add(ev)
		if ev.Type == journal.AtomFinish && ev.Atom != "" {
			kinds[ev.Atom] = journal.DataOf[journal.AtomFinishData](ev).Kind
		}
	}
	runs := map[string][]*history.Attempt{}
	for _, a := range book.Attempts() {
		runs[a.Atom] = append(runs[a.Atom], a)
	}
	exec := map[string]bool{}
	for _, a := range dag.Executable(st, 0) {
		exec[a.ID] = true
	}
	binds := map[string]*bindingDoc{}
	for _, b := range st.Bindings {
		binds[b.AtomID] = &bindingDoc{Summary: b.Summary, Artifacts: append([]string{}, b.Artifacts...)}
	}
	out := make([]atomDoc, 0, len(st.Atoms))
	for i := range st.Atoms {
		a := &st.Atoms[i]
		d := atomDoc{ID: a.ID, Description: a.Description, Status: a.Status, DependsOn: append([]string{}, a.DependsOn...),
			ORGroup: a.ORGroup, Executable: exec[a.ID], Attempts: len(runs[a.ID]), Kind: kinds[a.ID],
			Tokens: spend.Atoms[a.ID].Tokens, CostUSD: spend.Atoms[a.ID].CostUSD, Binding: binds[a.ID]}
		if rs := runs[a.ID]; len(rs) > 0 {
			last := rs[len(rs)-1]
			d.Outcome, d.Reason = last.Outcome, last.Reason
		}
		out = append(out, d)
	}
	return out, runs, nil
}

func (s *Server) atoms(w http.ResponseWriter, r *http.Request, l *loop) {
	docs, _, err := s.atomDocs(l)
	if err != nil {
		stateError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"atoms": docs})
}

func (s *Server) atom(w http.ResponseWriter, r *http.Request, l *loop) {
	docs, runs, err := s.atomDocs(l)
	if err != nil {
		stateError(w, err)
		return
	}
	id := r.PathValue("atom")
	for _, d := range docs {
		if d.ID == id {
			d.Runs = runs[id]
			if d.Runs == nil {
				d.Runs = []*history.Attempt{}
			}
			writeJSON(w, 200, d)
			return
		}
	}
	writeError(w, http.StatusNotFound, "loop %s has no atom %q", l.id, id)
}

func (s *Server) attempts(w http.ResponseWriter, r *http.Request, l *loop) {
	book := history.NewBook(l.stateFile)
	for _, ev := range l.snapshot() {
		book.Add(ev)
	}
	out := book.Attempts()
	if out == nil {
		out = []*history.Attempt{}
	}
	writeJSON(w, 200, map[string]any{"attempts": out})
}

const maxOutputChunk = 256 << 10

func (s *Server) output(w http.ResponseWriter, r *http.Request, l *loop) {
	q := r.URL.Query()
	atom, role := q.Get("atom"), q.Get("role")
	if role == "" {
		role = "worker"
	}
	n, err := strconv.Atoi(q.Get("attempt"))
	if atom == "" || err != nil || n < 1 {
		writeError(w, http.StatusBadRequest, "atom and attempt (a number from 1) are required")
		return
	}
	offset := int64(0)
	if o := q.Get("offset"); o != "" {
		if offset, err = strconv.ParseInt(o, 10, 64); err != nil || offset < 0 {
			writeError(w, http.StatusBadRequest, "offset: not a byte offset")
			return
		}
	}
	book := history.NewBook(l.stateFile)
	for _, ev := range l.snapshot() {
		book.Add(ev)
	}
	var found *history.Attempt
	for _, a := range book.Attempts() {
		if a.Atom == atom && a.Role == role && a.Attempt == n {
			found = a
		}
	}
	if found == nil {
		writeError(w, http.StatusNotFound, "loop %s has no %s attempt %d of atom %q", l.id, role, n, atom)
		return
	}
	if err := s.reg.within(found.LogFile); err != nil {
		stateError(w, err)
		return
	}
	f, err := os.Open(found.LogFile)
	size := int64(0)
	var data []byte
	if err == nil {
		defer f.Close()
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		if offset < size {
			data = make([]byte, min(size-offset, maxOutputChunk))
			k, _ := f.ReadAt(data, offset)
			data = data[:k]
		}
	}
	writeJSON(w, 200, map[string]any{"atom": atom, "role": role, "attempt": n, "outcome": found.Outcome,
		"offset": offset, "next": offset + int64(len(data)), "size": size, "data": string(data)})
}

type eventDoc struct {
	Seq   int           `json:"seq"`
	Event journal.Event `json:"event"`
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, l *loop) {
	q := r.URL.Query()
	after, limit := 0, 200
	var err error
	if v := q.Get("after"); v != "" {
		if after, err = strconv.Atoi(v); err != nil || after < 0 {
			writeError(w, http.StatusBadRequest, "after: not a sequence number")
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			writeError(w, http.StatusBadRequest, "limit: a number from 1 to 1000")
			return
		}
	}
	evs := l.snapshot()
	out := []eventDoc{}
	for i := after; i < len(evs) && len(out) < limit; i++ {
		out = append(out, eventDoc{Seq: i + 1, Event: evs[i]})
	}
	writeJSON(w, 200, map[string]any{"events": out, "next": after + len(out)})
}

func (s *Server) costs(w http.ResponseWriter, r *http.Request, l *loop) {
	writeJSON(w, 200, history.SpendOf(l.snapshot()))
}

func (s *Server) checklist(w http.ResponseWriter, r *http.Request, l *loop) {
	st, err := l.read()
	if err != nil {
		stateError(w, err)
		return
	}
	doc := map[string]any{"verified_at": nil, "passed": nil, "items": []any{}, "base_case": baseCaseItems(st)}
	evs := l.snapshot()
	for i := len(evs) - 1; i >= 0; i-- {
		if ev := evs[i]; ev.Type == journal.Verify {
			doc["verified_at"], doc["passed"] = ev.Time, ev.OK
			v := journal.DataOf[journal.VerifyData](ev)
			if v.Checklist != nil {
				doc["items"] = v.Checklist
			}
			doc["failures"] = v.Failures
			break
		}
	}
	writeJSON(w, 200, doc)
}

type baseItemDoc struct {
	Item  string `json:"item"`
	Type  string `json:"type,omitempty"`
	Value string `json:"value,omitempty"`
}

func baseCaseItems(st *state.State) []baseItemDoc {
	out := []baseItemDoc{}
	bc := st.Objective.BaseCase
	if bc == nil {
		return out
	}
	if bc.Legacy != nil {
		return append(out, baseItemDoc{Item: "base_case", Type: bc.Legacy.Type, Value: bc.Legacy.Value})
	}
	for _, it := range bc.Checklist {
		d := baseItemDoc{Item: it.Item}
		if it.Check != nil {
			d.Type, d.Value = it.Check.Type, it.Check.Value
			if d.Value == "" {
				d.Value = it.Check.Criteria
			}
		} else if it.HasGroup {
			d.Type = "group"
		} else {
			d.Type = "any_of"
		}
		out = append(out, d)
	}
	return out
}
