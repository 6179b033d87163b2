package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/aot-loop/aot/internal/confine"
	"github.com/aot-loop/aot/internal/proc"
	"github.com/aot-loop/aot/internal/verify"
)

// Payload is the data of one kind of event. Its fields are the keys of the
// event's data object, spelled by their json tags: a field without
// omitempty is always written, as the engine has always written it.
//
// Event.Data stays the envelope every event travels in (the journal's lines,
// aot status --json, the API, a Temporal workflow's status): writers fill it
// with Event.With, readers take it out with DataOf or Decode, and neither
// touches the map.
type Payload interface {
	EventType() string
}

// With returns e with p's kind as its type and p as its data.
func (e Event) With(p Payload) Event {
	e.Type = p.EventType()
	e.Data = dataOf(p)
	return e
}

// DataOf returns the data of e as a T. A field the event does not have, or
// has with another type (a hand edit, an older version), is left zero, as
// the other fields are still read: a reader never fails on one event.
func DataOf[T Payload](e Event) T {
	var p T
	if len(e.Data) == 0 {
		return p
	}
	v := reflect.ValueOf(&p).Elem()
	if !direct(v, e.Data) {
		p = dataOfJSON[T](e)
	}
	present(v, e.Data)
	return p
}

// dataOfJSON reads e's data as a T through JSON: what DataOf does for a
// value direct does not take (a nested object, a number of another type).
func dataOfJSON[T Payload](e Event) T {
	var p T
	if b, err := json.Marshal(e.Data); err == nil {
		_ = json.Unmarshal(b, &p) // a field of another type is skipped, the others read
	}
	return p
}

// direct sets v's fields from data without going through JSON, for what
// a decoded line (strings, bools, float64, lists of strings) or a writer
// (the field's own type) holds; false when a value needs JSON. A status
// reads every atom_finish of a journal: this is 10x quicker.
func direct(v reflect.Value, data map[string]any) bool {
	names := keysOf(v.Type())
	if names == nil {
		return false
	}
	matched := 0
	for i, name := range names {
		if x, ok := data[name]; ok {
			if !setDirect(v.Field(i), x) {
				return false
			}
			matched++
		}
	}
	return matched == len(data) // a key of another spelling ("Kind") is JSON's to match
}

var countType = reflect.TypeFor[Count]()

// keys holds each payload type's keys, field by field (nil for a type
// direct does not read).
var keys sync.Map // reflect.Type -> []string

func keysOf(t reflect.Type) []string {
	if k, ok := keys.Load(t); ok {
		return k.([]string)
	}
	names := make([]string, t.NumField())
	for i := range names {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || !f.IsExported() || name == "" || name == "-" {
			names = nil
			break
		}
		names[i] = name
	}
	keys.Store(t, names)
	return names
}

func setDirect(f reflect.Value, x any) bool {
	if x == nil {
		return true // null leaves a field as it is, as in JSON
	}
	if f.Kind() == reflect.Pointer {
		n := reflect.New(f.Type().Elem())
		if !setDirect(n.Elem(), x) {
			return false
		}
		f.Set(n)
		return true
	}
	switch xv := reflect.ValueOf(x); {
	case xv.Type() == f.Type() && f.Kind() != reflect.Slice && f.Kind() != reflect.Map:
		f.Set(xv)
		return true
	case f.Type() == countType:
		n, ok := x.(float64)
		if ok {
			f.SetInt(int64(countOf(n)))
		}
		return ok
	}
	switch f.Kind() {
	case reflect.String:
		s, ok := x.(string)
		f.SetString(s)
		return ok
	case reflect.Bool:
		b, ok := x.(bool)
		f.SetBool(b)
		return ok
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, ok := x.(float64)
		if !ok || n != math.Trunc(n) || f.OverflowInt(int64(n)) || math.Abs(n) > 1<<53 {
			return false
		}
		f.SetInt(int64(n))
		return true
	case reflect.Float64:
		n, ok := x.(float64)
		f.SetFloat(n)
		return ok
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String || f.Type().Elem() != reflect.TypeFor[string]() {
			return false
		}
		var list []string
		switch l := x.(type) {
		case []string:
			list = append([]string{}, l...)
		case []any:
			list = make([]string, len(l))
			for i, e := range l {
				s, ok := e.(string)
				if !ok {
					return false
				}
				list[i] = s
			}
		default:
			return false
		}
		f.Set(reflect.ValueOf(list))
		return true
	}
	return false
}

// present sets the pointer fields whose key the data holds, even as null,
// so that a key written null ("stopped": null) is written back.
func present(v reflect.Value, data map[string]any) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			present(fv, data)
			continue
		}
		if _, ok := data[name]; ok && fv.Kind() == reflect.Pointer && fv.IsNil() {
			fv.Set(reflect.New(f.Type.Elem()))
		}
	}
}

// kinds reads the payload of every event type that carries data.
var kinds = map[string]func(Event) Payload{
	RunStart: decoder[RunStartData], RunResume: decoder[RunResumeData],
	AtomStart: decoder[AtomStartData], AtomFinish: decoder[AtomFinishData], AtomReset: decoder[AtomResetData],
	ORSwitch: decoder[ORSwitchData], Decompose: decoder[DecomposeData], AddAtom: decoder[AddAtomData],
	ParentDone: decoder[ParentDoneData], Verify: decoder[VerifyData], Iteration: decoder[IterationData],
	Stall: decoder[StallData], Redirect: decoder[RedirectData], Stop: decoder[StopData],
	Checkpoint: decoder[CheckpointData], Backoff: decoder[BackoffData], QuotaWait: decoder[QuotaWaitData],
	Confirm: decoder[ConfirmData], RateLimit: decoder[RateLimitData],
	Process: decoder[ProcessData], HandEdit: decoder[HandEditData], Workspace: decoder[WorkspaceData],
	Worktree: decoder[WorktreeData], Merge: decoder[MergeData], Pause: decoder[PauseData], Resume: decoder[ResumeData],
	UsageRefused: decoder[UsageRefusedData], JournalLost: decoder[JournalLostData],
	PermissionDenied: decoder[PermissionDeniedData], AttemptRetry: decoder[AttemptRetryData],
}

func decoder[T Payload](e Event) Payload { return DataOf[T](e) }

// Decode returns the event's data as the payload of its type (an
// AtomFinishData for an atom_finish, ...). An event type that carries no
// data (or one this version does not know) is an error.
func (e Event) Decode() (Payload, error) {
	f, ok := kinds[e.Type]
	if !ok {
		return nil, fmt.Errorf("journal: a %q event carries no data this version reads", e.Type)
	}
	return f(e), nil
}

// dataOf is p's fields as a data object, each value as the field holds it
// (so that what is written is what the writer gave), embedded structs
// flattened, empty omitempty fields left out; nil when nothing is left.
func dataOf(p Payload) map[string]any {
	m := map[string]any{}
	addFields(m, reflect.ValueOf(p))
	if len(m) == 0 {
		return nil
	}
	return m
}

func addFields(m map[string]any, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			addFields(m, fv)
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.Contains(opts, "omitempty") && empty(fv) {
			continue
		}
		m[name] = fv.Interface()
	}
}

// empty is encoding/json's omitempty test, but for one thing: a slice or
// map is empty only when nil, so that a list written empty ([]) reads back
// empty, and a list left out reads back nil.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.IsNil()
	case reflect.Array, reflect.String:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return v.IsZero()
}

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
