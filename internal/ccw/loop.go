// Package ccw is the CCW (Claude-Code-Workflow) view of a loop: the loop's
// state file and journal mapped onto CCW's LoopState document
// (.loop/{id}.json), its task list and its progress folder, so that tools
// built for CCW's loop API can watch an aot loop. docs/CCW.md maps every
// field.
//
// The view is derived, never a source: Build maps a state and a journal to
// a Loop; Write puts it on disk atomically; Recover reads it back, rebuilding
// a damaged document from the progress files and the journal.
package ccw

import (
	"time"

	"github.com/aot-loop/aot/internal/verify"
)

// Meta is what the API knows of a loop and the state file and journal do
// not: its id, title, description and creation time, and where it lives.
type Meta struct {
	ID          string
	Title       string
	Description string
	Workspace   string
	StateFile   string
	CreatedAt   time.Time
}

// CCW loop statuses.
const (
	StatusCreated   = "created"
	StatusRunning   = "running"
	StatusPaused    = "paused"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusUserExit  = "user_exit"
)

// Loop is CCW's LoopState document. The fields up to SkillState are the
// API's; the ones marked as extensions are aot's additions, which CCW
// readers ignore.
type Loop struct {
	LoopID           string     `json:"loop_id"`
	Title            string     `json:"title"`
	Description      string     `json:"description"`
	MaxIterations    int        `json:"max_iterations"`
	Status           string     `json:"status"`
	CurrentIteration int        `json:"current_iteration"`
	CreatedAt        time.Time  `json:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
	CompletedAt      *time.Time `json:"completed_at,omitempty"`
	FailureReason    string     `json:"failure_reason,omitempty"`

	// Extensions: where the loop lives, and how many journal events the
	// document reflects.
	Workspace     string `json:"workspace,omitempty"`
	StateFile     string `json:"state_file,omitempty"`
	JournalEvents int    `json:"journal_events"`

	SkillState *SkillState `json:"skill_state,omitempty"`
}

// SkillState is the skill's part of the document: the phases' progress.
type SkillState struct {
	CurrentAction    *string      `json:"current_action"` // init, develop, debug, validate, complete
	LastAction       *string      `json:"last_action"`
	CompletedActions []string     `json:"completed_actions"`
	Mode             string       `json:"mode"`
	Develop          Develop      `json:"develop"`
	Debug            Debug        `json:"debug"`
	Validate         Validate     `json:"validate"`
	Errors           []ErrorEntry `json:"errors"`
	Summary          *Summary     `json:"summary,omitempty"`
}

// Develop is the work graph as CCW's task list.
type Develop struct {
	Total          int        `json:"total"`
	Completed      int        `json:"completed"`
	CurrentTask    *string    `json:"current_task"`
	Tasks          []Task     `json:"tasks"`
	LastProgressAt *time.Time `json:"last_progress_at"`
}

// Task statuses.
const (
	TaskPending    = "pending"
	TaskInProgress = "in_progress"
	TaskCompleted  = "completed"
	TaskFailed     = "failed"
)

// Task is one atom as a CCW DevelopTask.
type Task struct {
	ID           string     `json:"id"`
	Description  string     `json:"description"`
	Tool         *string    `json:"tool"` // the agent CLI of its last run; null before any
	Mode         *string    `json:"mode"` // write for a worker's run, analysis for a probe's or planner's
	Status       string     `json:"status"`
	FilesChanged []string   `json:"files_changed"`
	CreatedAt    *time.Time `json:"created_at"` // known only for atoms a planner added
	CompletedAt  *time.Time `json:"completed_at"`

	// Extensions.
	DependsOn      []string `json:"depends_on"`
	ORGroup        string   `json:"or_group,omitempty"`
	Attempts       int      `json:"attempts"`        // agent runs started on it (journal)
	FailedAttempts int      `json:"failed_attempts"` // the state file's counter
	LastFailure    string   `json:"last_failure,omitempty"`
	Summary        string   `json:"summary,omitempty"` // its binding's summary
	Tokens         int64    `json:"tokens"`
	CostUSD        float64  `json:"cost_usd"`
	UsageUnknown   int      `json:"usage_unknown_runs,omitempty"` // runs whose usage nobody reported
}

// Debug is the loop's backtracking: each OR group's choices as hypotheses.
type Debug struct {
	ActiveBug           *string      `json:"active_bug"`
	HypothesesCount     int          `json:"hypotheses_count"`
	Hypotheses          []Hypothesis `json:"hypotheses"`
	ConfirmedHypothesis *string      `json:"confirmed_hypothesis"`
	Iteration           int          `json:"iteration"` // OR switches so far
	LastAnalysisAt      *time.Time   `json:"last_analysis_at"`
}

// Hypothesis statuses.
const (
	HypothesisPending   = "pending"
	HypothesisConfirmed = "confirmed"
	HypothesisRejected  = "rejected"
)

// Hypothesis is one choice of an OR group.
type Hypothesis struct {
	ID                string            `json:"id"` // the choice's atom id
	Description       string            `json:"description"`
	TestableCondition *string           `json:"testable_condition"`
	LoggingPoint      *string           `json:"logging_point"`
	EvidenceCriteria  *EvidenceCriteria `json:"evidence_criteria"`
	Likelihood        int               `json:"likelihood"` // its place among the group's choices, 1 = tried first
	Status            string            `json:"status"`
	Evidence          *Evidence         `json:"evidence"`
	VerdictReason     *string           `json:"verdict_reason"`

	ORGroup string `json:"or_group"` // extension
}

// EvidenceCriteria says what would confirm or reject a hypothesis. aot
// has no such text: a choice is confirmed by resolving and rejected by
// failing, so it stays null.
type EvidenceCriteria struct {
	Confirm string `json:"confirm"`
	Reject  string `json:"reject"`
}

// Evidence is what the journal holds on a choice: its agents' runs, the
// backtrack away from it, and its result.
type Evidence struct {
	Runs      []Run      `json:"runs"`
	Backtrack *Backtrack `json:"backtrack,omitempty"`
	Summary   string     `json:"summary,omitempty"`
	Artifacts []string   `json:"artifacts,omitempty"`
}

// Run is one finished agent run on an atom.
type Run struct {
	Time       time.Time `json:"time"`
	Role       string    `json:"role,omitempty"`
	Attempt    int       `json:"attempt,omitempty"`
	OK         bool      `json:"ok"`
	Kind       string    `json:"kind,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	DurationMS int64     `json:"duration_ms,omitempty"`
}

// Backtrack is the OR group leaving a failed choice.
type Backtrack struct {
	Time   time.Time `json:"time"`
	To     string    `json:"to,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// Validate is the base case's last verification.
type Validate struct {
	PassRate    *float64     `json:"pass_rate"` // null before any verification
	Coverage    *float64     `json:"coverage"`  // null when no output gave one
	TestResults []TestResult `json:"test_results"`
	Passed      bool         `json:"passed"`
	FailedTests []string     `json:"failed_tests"`
	LastRunAt   *time.Time   `json:"last_run_at"`

	// Extensions: the base case's checklist with its evidence, the
	// verification's failures, how many verifications ran, and whether
	// pass_rate counts tests or (when no output held test results) the
	// checklist's items.
	Checklist     []verify.ItemResult `json:"checklist"`
	Failures      []string            `json:"failures,omitempty"`
	Runs          int                 `json:"runs"`
	PassRateBasis string              `json:"pass_rate_basis,omitempty"` // tests or checklist
}

// Test result statuses.
const (
	TestPassed  = "passed"
	TestFailed  = "failed"
	TestSkipped = "skipped"
)

// TestResult is one test of a report parsed from a check's output.
type TestResult struct {
	TestName     string  `json:"test_name"`
	Suite        string  `json:"suite"`
	Status       string  `json:"status"`
	DurationMS   float64 `json:"duration_ms"`
	ErrorMessage *string `json:"error_message"`
	StackTrace   *string `json:"stack_trace"`
}

// ErrorEntry is one failure of the loop.
type ErrorEntry struct {
	Action    string    `json:"action"`
	Message   string    `json:"message"`
	Timestamp time.Time `json:"timestamp"`
}

// Summary is written once the loop has ended.
type Summary struct {
	Duration   int64           `json:"duration"` // milliseconds from the first journal event to the end
	Iterations int             `json:"iterations"`
	Develop    DevelopSummary  `json:"develop"`
	Debug      DebugSummary    `json:"debug"`
	Validate   ValidateSummary `json:"validate"`
}

// DevelopSummary counts the tasks at the end.
type DevelopSummary struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// DebugSummary counts the hypotheses at the end.
type DebugSummary struct {
	Hypotheses int `json:"hypotheses"`
	Confirmed  int `json:"confirmed"`
	Rejected   int `json:"rejected"`
}

// ValidateSummary is the last verification's verdict.
type ValidateSummary struct {
	Passed   bool     `json:"passed"`
	PassRate *float64 `json:"pass_rate"`
	Coverage *float64 `json:"coverage"`
}
