package journal

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/verify"
)

// The payload of each event type that carries data (docs/JOURNAL.md,
// Types), and the reasons that are signals.

// Confinement is whether agents' writes are confined to their workdir, and
// why (confine.Status, as run_start journals it).
type Confinement = confine.Status

// RunStartData: a run starts on a fresh loop.
type RunStartData struct {
	Agents      map[string]string `json:"agents,omitempty"` // each role's agent: worker: "claude (model sonnet)"
	Confinement *Confinement      `json:"confinement,omitempty"`
	Session     *Session          `json:"session,omitempty"` // a loop an owning session drives
}

// Session names the coding-agent session that owns a loop.
type Session struct {
	Client string `json:"client"`
	ID     string `json:"id"`
}

func (RunStartData) EventType() string { return RunStart }

// RunResumeData: a run resumes a stopped, completed or crashed loop.
type RunResumeData struct {
	Agents      map[string]string `json:"agents,omitempty"`
	Confinement *Confinement      `json:"confinement,omitempty"`
	// After a crash: the results replayed.
	Replayed *int `json:"replayed,omitempty"`
	// After a stop or a completion: why the loop stopped, and its stall
	// count then.
	PreviousStopReason *string `json:"previous_stop_reason,omitempty"`
	StallCount         *int    `json:"stall_count,omitempty"`
}

func (RunResumeData) EventType() string { return RunResume }

// AtomStartData: an agent starts on an atom.
type AtomStartData struct {
	Agent string `json:"agent,omitempty"` // the session's agent, for a loop a session drives
}

func (AtomStartData) EventType() string { return AtomStart }

// AtomFinishData: an agent run ends. Which fields are set depends on the
// role and the outcome (docs/JOURNAL.md).
type AtomFinishData struct {
	Agent string `json:"agent,omitempty"` // the session's agent, for a loop a session drives
	// A worker's success (replayed on resume).
	Summary   string   `json:"summary,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
	Commit    string   `json:"commit,omitempty"` // an adopted merge's commit
	// Usage: the tokens, or that the agent reported none.
	// Both are written, or neither (the agent reported no tokens).
	InputTokens  *Count `json:"input_tokens,omitempty"`
	OutputTokens *Count `json:"output_tokens,omitempty"`
	UsageUnknown bool   `json:"usage_unknown,omitempty"`
	// A failure's kind (agent.FailureKind): crash, timeout, no_change, ...
	Kind     string `json:"kind,omitempty"`
	Proposed int    `json:"proposed,omitempty"` // a planner's atoms and decompositions
	// A judge's (atom base_case, role judge).
	Check          string `json:"check,omitempty"`
	Files          int    `json:"files,omitempty"`
	FilesTruncated bool   `json:"files_truncated,omitempty"`
	Evidence       string `json:"evidence,omitempty"`
	Error          string `json:"error,omitempty"`
}

func (AtomFinishData) EventType() string { return AtomFinish }

// AtomResetData: an atom goes back to pending without a result.
type AtomResetData struct {
	Reopens      int `json:"reopens,omitempty"`       // the atom's reopenings so far
	ProcessTrees int `json:"process_trees,omitempty"` // agents of the previous engine killed
}

func (AtomResetData) EventType() string { return AtomReset }

// ORSwitchData: an OR group selects another choice.
type ORSwitchData struct {
	ORGroup string `json:"or_group,omitempty"`
	Failed  string `json:"failed,omitempty"`
}

func (ORSwitchData) EventType() string { return ORSwitch }

// DecomposeData: the planner split an atom.
type DecomposeData struct {
	Children []string `json:"children,omitempty"`
}

func (DecomposeData) EventType() string { return Decompose }

// AddAtomData: the planner added atoms.
type AddAtomData struct {
	Children []string `json:"children,omitempty"`
}

func (AddAtomData) EventType() string { return AddAtom }

// ParentDoneData: a decomposed parent resolved with its children.
type ParentDoneData struct {
	Summary   string   `json:"summary"`
	Artifacts []string `json:"artifacts"`
}

func (ParentDoneData) EventType() string { return ParentDone }

// VerifyData: the base case was checked.
type VerifyData struct {
	Failures  []string            `json:"failures"`
	Checklist []verify.ItemResult `json:"checklist"`
	Outputs   string              `json:"outputs,omitempty"` // the folder of each command check's whole output
}

func (VerifyData) EventType() string { return Verify }

// IterationData: a sweep (or a verification round) ends.
type IterationData struct {
	// A sweep's counts; nil on a stall explained (reason "stall explained").
	Unresolved       *int `json:"unresolved,omitempty"`
	UnresolvedBefore *int `json:"unresolved_before,omitempty"`
	Attempted        *int `json:"attempted,omitempty"`
	StallCount       int  `json:"stall_count"`
	Repair           bool `json:"repair,omitempty"`
	Reopened         int  `json:"reopened,omitempty"` // atoms a stall explained sent back
}

func (IterationData) EventType() string { return Iteration }

// StallData: a sweep made no progress.
type StallData struct {
	Unresolved int `json:"unresolved"`
	StallCount int `json:"stall_count"`
}

func (StallData) EventType() string { return Stall }

// RedirectData: a redirect was applied (ok true) or refused.
type RedirectData struct {
	Error string `json:"error,omitempty"` // refused: why
	// Applied: the atoms whose attempts it stopped (written, null when
	// none, whenever the redirect was applied).
	Stopped *[]string `json:"stopped,omitempty"`
}

func (RedirectData) EventType() string { return Redirect }

// StopData: the run halted.
type StopData struct {
	Message  string `json:"message"`
	ExitCode int    `json:"exit_code"`
}

func (StopData) EventType() string { return Stop }

// CheckpointData: the state file holds everything before this line.
type CheckpointData struct {
	// The loop's usage so far; nil in a journal written before
	// checkpoints carried it.
	InputTokens  *Count      `json:"input_tokens,omitempty"`
	OutputTokens Count       `json:"output_tokens"`
	CostUSD      float64     `json:"cost_usd"`
	UsageUnknown Count       `json:"usage_unknown,omitempty"` // attempts that reported no usage
	Processes    []proc.Tree `json:"processes,omitempty"`     // the trees in flight
}

func (CheckpointData) EventType() string { return Checkpoint }

// BackoffData: a failed atom waits before its next step.
type BackoffData struct {
	Until string `json:"until"`
}

func (BackoffData) EventType() string { return Backoff }

// QuotaWaitData: the agent's quota is spent until Until (RFC 3339).
type QuotaWaitData struct {
	Until string `json:"until"`
}

func (QuotaWaitData) EventType() string { return QuotaWait }

// ConfirmData: a person's word on an assertion the judge passed.
type ConfirmData struct {
	Item string `json:"item"`
}

func (ConfirmData) EventType() string { return Confirm }

// RateLimitData: the provider refused for a while.
type RateLimitData struct {
	Until       string `json:"until"`
	MaxParallel int    `json:"max_parallel"`
	InARow      int    `json:"in_a_row"`
	Kind        string `json:"kind"` // the failure's kind (agent.FailureKind)
}

func (RateLimitData) EventType() string { return RateLimit }

// ProcessData: an attempt's process tree started.
type ProcessData struct {
	Tree proc.Tree `json:"tree"`
}

func (ProcessData) EventType() string { return Process }

// HandEditData: the state file changed behind the engine's back.
type HandEditData struct {
	Stopped *[]string `json:"stopped,omitempty"` // taken as a redirect: the atoms whose attempts it stopped
	Kept    string    `json:"kept,omitempty"`    // refused: where the edited file is kept
}

func (HandEditData) EventType() string { return HandEdit }

// WorkspaceData: the run's isolation.
type WorkspaceData struct {
	Integration string `json:"integration,omitempty"` // none when the run is not isolated
	Branch      string `json:"branch,omitempty"`
}

func (WorkspaceData) EventType() string { return Workspace }

// WorktreeData: an attempt's worktree, or an orphan removed. A merge's
// intent (reason "merging") adds the number, the commit to come, the
// changed files and the summary.
type WorktreeData struct {
	Path    string   `json:"path,omitempty"`
	Branch  string   `json:"branch"`
	Number  int      `json:"number,omitempty"`
	Commit  string   `json:"commit,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Summary string   `json:"summary,omitempty"`
}

func (WorktreeData) EventType() string { return Worktree }

// MergeData: an attempt's changes merged (ok true) or a conflict.
type MergeData struct {
	Worktree            string   `json:"worktree,omitempty"`
	Branch              string   `json:"branch"`
	Changed             []string `json:"changed"`
	Commit              string   `json:"commit,omitempty"`
	Unclaimed           []string `json:"unclaimed,omitempty"`
	ClaimedButUnchanged []string `json:"claimed_but_unchanged,omitempty"`
}

func (MergeData) EventType() string { return Merge }

// PauseData: a person paused the loop.
type PauseData struct {
	Kill    bool `json:"kill"`
	Running int  `json:"running"`
}

func (PauseData) EventType() string { return Pause }

// ResumeData: a paused loop goes on.
type ResumeData struct {
	PausedMS int64 `json:"paused_ms"`
}

func (ResumeData) EventType() string { return Resume }

// UsageRefusedData: usage numbers no sum can use.
type UsageRefusedData struct {
	Refused []string `json:"refused"` // one note per field
}

func (UsageRefusedData) EventType() string { return UsageRefused }

// JournalLostData: the journal was written back.
type JournalLostData struct {
	Kept      string `json:"kept,omitempty"`       // the file found in its place
	LostBytes int64  `json:"lost_bytes,omitempty"` // cut in place
}

func (JournalLostData) EventType() string { return JournalLost }

// PermissionDeniedData: the agent's CLI refused a tool call.
type PermissionDeniedData struct {
	Tool string `json:"tool"`
	Path string `json:"path,omitempty"`
	Why  string `json:"why,omitempty"`
}

func (PermissionDeniedData) EventType() string { return PermissionDenied }

// AttemptRetryData: Temporal retries an activity.
type AttemptRetryData struct {
	Activity   string `json:"activity"`
	ActivityID string `json:"activity_id"`
	Try        int32  `json:"try"`
	Worker     string `json:"worker,omitempty"`     // where it failed
	RunningOn  string `json:"running_on,omitempty"` // the retry's worker, when it already runs
	Failure    string `json:"failure"`
	Doing      string `json:"doing,omitempty"` // what a merge or verification was at
}

func (AttemptRetryData) EventType() string { return AttemptRetry }

// SessionUsageData: the tokens an in-session loop's owning session used
// since its last stop, from its transcript.
type SessionUsageData struct {
	Session      string `json:"session"`
	InputTokens  Count  `json:"input_tokens"`
	OutputTokens Count  `json:"output_tokens"`
}

func (SessionUsageData) EventType() string { return SessionUsage }

// Tokens returns the input and output tokens an atom_finish journaled (0
// when it journaled none).
func (d AtomFinishData) Tokens() (in, out int64) {
	if d.InputTokens != nil {
		in = int64(*d.InputTokens)
	}
	if d.OutputTokens != nil {
		out = int64(*d.OutputTokens)
	}
	return in, out
}

// Ref returns a pointer to v, for the fields a payload writes even when
// zero (the tokens of an atom_finish, an iteration's counts).
func Ref[T any](v T) *T { return &v }

// Count is a token count as the journal holds it: any JSON number reads,
// saturating as the engine sums (negative or not a number is 0, past the
// largest int64 is the largest int64), so that a journal edited by hand,
// or written before the counts saturated, still reads.
type Count int64

func (c *Count) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*c = Count(max(n, 0))
		return nil
	}
	// Not a number (a hand edit) is 0 too, and the event's other fields
	// still read: an error here would stop the whole event's decoding.
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		f = 0
	}
	*c = countOf(f)
	return nil
}

// countOf is a count read as a float64, saturating.
func countOf(f float64) Count {
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	}
	return Count(f)
}

// Reasons that are signals as well as words: the engine decides by them
// (a replayed finish is not counted twice, a merge's intent is adopted on
// resume, a kept worktree is shown), so they are written and tested here,
// by the methods below, and never spelled elsewhere. The words are the
// on-disk format: old journals hold them.
const (
	replayedReason = "replayed from the journal after a crash"
	mergingReason  = "merging: the attempt is committed; its merge follows"
	keptReason     = "kept: a failed attempt, kept for a look (--keep-failed)"
)

// Replayed returns e as an atom_finish replayed on resume after a crash:
// its attempt was journaled (and counted) before.
func (e Event) Replayed() Event {
	e.Type, e.Reason = AtomFinish, replayedReason
	return e
}

// IsReplayed reports whether e is an atom_finish replayed on resume.
func (e Event) IsReplayed() bool { return e.Type == AtomFinish && e.Reason == replayedReason }

// MergeIntent returns a worktree event for a merge's intent, journaled
// (and synced) before the merge so that a resumed run can adopt it.
func MergeIntent(e Event, d WorktreeData) Event {
	e.Reason = mergingReason
	return e.With(d)
}

// IsMergeIntent reports whether e is a merge's intent (MergeIntent).
func (e Event) IsMergeIntent() bool { return e.Type == Worktree && e.Reason == mergingReason }

// WorktreeKept returns a worktree event for a failed attempt's worktree
// kept for a look (--keep-failed).
func WorktreeKept(e Event, d WorktreeData) Event {
	e.Reason = keptReason
	return e.With(d)
}

// IsWorktreeKept reports whether e is a kept worktree (WorktreeKept; the
// words began with "kept" in every version).
func (e Event) IsWorktreeKept() bool {
	return e.Type == Worktree && strings.HasPrefix(e.Reason, "kept")
}
