// Package state owns the AoT Loop state file (State Contract v1.3): its model,
// parsing with a comment-preserving round trip, validation and the crash-safe store.
//
// One reader per speed, all decoding through the same field tables
// (fields.go):
//   - Parse (document.go) is the full reader a write needs: the fast scanner
//     (scan.go) builds a node tree with the source span of every node, or,
//     for a hand-written layout outside it, the YAML library does
//     (fallback.go); the decoder (decode.go) turns the tree into a State.
//   - The quick reader (quick.go) is for reading only (aot state, status,
//     the hooks, UpdateControl): it decodes the atoms and bindings sections
//     line by line and the small rest as Parse does; a file outside aot's
//     layout is read by Parse.
//   - PeekStatus (peek.go) reads control.status alone, for the hooks.
package state

// Atom statuses.
const (
	StatusPending    = "pending"
	StatusInProgress = "in_progress"
	StatusResolved   = "resolved"
)

// Control statuses.
const (
	ControlPending   = "pending"
	ControlRunning   = "running"
	ControlStopped   = "stopped"
	ControlCompleted = "completed"
)

// Check types of the base case.
const (
	CheckCommand    = "command"
	CheckNotCommand = "not_command"
	CheckFile       = "file"
	CheckNotFile    = "not_file"
	CheckAssertion  = "assertion"
	CheckQuality    = "quality"
)

// Correction types recorded by a redirect.
var CorrectionTypes = []string{"objective_change", "dag_adjustment", "constraint_change", "bindings_override"}

// Default constraints of a new objective.
const (
	DefaultMaxIterations     = 20
	DefaultMaxParallelAgents = 3
	DefaultMaxStallCount     = 5
)

// State is the whole state file: the YAML frontmatter sections and the Markdown body.
type State struct {
	Objective      Objective
	Control        Control
	Atoms          []Atom
	Decompositions []Decomposition
	ORGroups       []ORGroup // a YAML mapping keyed by group name, in file order
	Bindings       []Binding // a YAML mapping keyed by atom id, in file order
	Trail          []TrailEntry
	Corrections    []Correction
	Body           string // everything after the closing "---" line

	doc *document // the source this state was read from; nil for a state built in memory
}

// Objective is the goal and its externally verifiable base case.
type Objective struct {
	Goal             string
	BaseCase         *BaseCase
	BackgroundIntent string
	Deliverables     string
	DefinitionOfDone string
	Constraints      Constraints
}

// Constraints bound a run. The first three are the schema's; the rest are
// AoT Loop extensions and are left out of the file while zero.
type Constraints struct {
	MaxIterations      int
	MaxParallelAgents  int
	MaxStallCount      int
	MaxWallTime        string  // a Go duration or seconds, e.g. "2h"
	MaxCostUSD         float64 // 0 = no limit
	MaxTokens          int64   // 0 = no limit
	MaxAttemptsPerAtom int     // 0 = no limit
}

// BaseCase is either the legacy single check or a checklist.
type BaseCase struct {
	Legacy       *Check          // set for the legacy form {type, value}
	Checklist    []ChecklistItem // set for the checklist form
	HasChecklist bool            // the checklist key was present (an empty checklist is an error, not a pass)
}

// ChecklistItem is one named entry: a single check, an AND group or an OR group.
type ChecklistItem struct {
	Item     string
	Check    *Check
	Group    []ChecklistItem
	AnyOf    []ChecklistItem
	HasGroup bool // the group key was present, even if empty
	HasAnyOf bool // the any_of key was present, even if empty
	Line     int  // line in the state file, 0 when unknown
}

// Check is one verifiable condition.
type Check struct {
	Type          string
	Value         string
	Criteria      string
	Rubric        []RubricCriterion
	PassThreshold *float64
	Scope         string
	Timeout       string // optional per-check timeout (seconds or a Go duration)
	Line          int
}

// RubricCriterion is one weighted criterion of a quality check.
type RubricCriterion struct {
	Criterion   string
	Description string
	Weight      float64
	Levels      []RubricLevel
}

// RubricLevel describes one score of a rubric criterion.
type RubricLevel struct {
	Score int
	Text  string
}

// Control holds the loop's execution flags.
type Control struct {
	Status            string
	Iteration         int
	StallCount        int
	PrevPendingCount  int
	StopRequested     bool
	StopReason        *string
	RedirectRequested bool
	// LoopID names this loop's run of the state file (AoT Loop extension):
	// its git branches, worktree folders and Temporal workflow derive from
	// it. The engine sets it when a loop first starts and keeps it across
	// resumes; empty until then. Letters, digits, '.', '_' and '-' only.
	LoopID string
}

// Atom is one node of the work graph.
type Atom struct {
	ID          string
	Description string
	Status      string
	DependsOn   []string
	ORGroup     string // empty when not a member of an OR group
	Attempts    int    // failed or abandoned attempts so far (AoT Loop extension)
	LastFailure string // reason of the last failure (AoT Loop extension)
	// Scope lists the files the atom may change, as globs (AoT Loop
	// extension): two atoms with overlapping scopes never run at once.
	Scope []string
	// ExpectChanges false declares work that legitimately changes no file
	// (AoT Loop extension): a worker attempt that changed nothing is then
	// not a failed attempt. nil (absent) means true.
	ExpectChanges *bool
	Line          int // line of the atom in the state file, 0 when unknown
}

// Decomposition records that Parent was split into Children.
type Decomposition struct {
	Parent   string
	Children []string
	Reason   string
	Line     int
}

// ORGroup is a set of alternative atoms of which one is selected at a time.
type ORGroup struct {
	Name        string
	Choices     []string
	Selected    string
	Failed      []string
	Speculative bool
	Line        int
}

// Binding is the short contracted result of a resolved atom.
type Binding struct {
	AtomID    string
	Summary   string
	Artifacts []string
	Line      int
}

// TrailEntry records one OR selection.
type TrailEntry struct {
	ORGroup   string
	Selected  string
	Reason    string
	Timestamp string
}

// Correction records one redirect.
type Correction struct {
	Timestamp    string
	Type         string
	Description  string
	TrailCleared bool
}

// AtomIndex maps atom ids to their index in s.Atoms (the first one for duplicates).
func (s *State) AtomIndex() map[string]int {
	idx := make(map[string]int, len(s.Atoms))
	for i := range s.Atoms {
		if _, dup := idx[s.Atoms[i].ID]; !dup {
			idx[s.Atoms[i].ID] = i
		}
	}
	return idx
}

// Atom returns the atom with the given id, or nil.
func (s *State) Atom(id string) *Atom {
	for i := range s.Atoms {
		if s.Atoms[i].ID == id {
			return &s.Atoms[i]
		}
	}
	return nil
}

// ORGroup returns the OR group with the given name, or nil.
func (s *State) ORGroup(name string) *ORGroup {
	for i := range s.ORGroups {
		if s.ORGroups[i].Name == name {
			return &s.ORGroups[i]
		}
	}
	return nil
}

// Binding returns the binding of the given atom, or nil.
func (s *State) Binding(atomID string) *Binding {
	for i := range s.Bindings {
		if s.Bindings[i].AtomID == atomID {
			return &s.Bindings[i]
		}
	}
	return nil
}

// SetBinding adds or replaces the binding of b.AtomID.
func (s *State) SetBinding(b Binding) {
	if old := s.Binding(b.AtomID); old != nil {
		line := old.Line
		*old = b
		old.Line = line
		return
	}
	s.Bindings = append(s.Bindings, b)
}

// DeleteBinding removes the binding of atomID; it reports whether one existed.
func (s *State) DeleteBinding(atomID string) bool {
	for i := range s.Bindings {
		if s.Bindings[i].AtomID == atomID {
			s.Bindings = append(s.Bindings[:i], s.Bindings[i+1:]...)
			return true
		}
	}
	return false
}

// New returns a fresh state in the initial shape of the contract: control
// pending, iteration 0, prev_pending_count -1, default constraints, empty
// sections, and the user's original request as the Markdown body.
func New(obj Objective, atoms []Atom, prompt string) *State {
	if obj.Constraints.MaxIterations == 0 {
		obj.Constraints.MaxIterations = DefaultMaxIterations
	}
	if obj.Constraints.MaxParallelAgents == 0 {
		obj.Constraints.MaxParallelAgents = DefaultMaxParallelAgents
	}
	if obj.Constraints.MaxStallCount == 0 {
		obj.Constraints.MaxStallCount = DefaultMaxStallCount
	}
	for i := range atoms {
		if atoms[i].Status == "" {
			atoms[i].Status = StatusPending
		}
		if atoms[i].DependsOn == nil {
			atoms[i].DependsOn = []string{}
		}
	}
	return &State{
		Objective: obj,
		Control:   Control{Status: ControlPending, PrevPendingCount: -1},
		Atoms:     atoms,
		Body:      "\n# Original Prompt\n\n" + prompt + "\n",
	}
}
