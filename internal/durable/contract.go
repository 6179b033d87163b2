// Package durable runs a loop as a Temporal workflow: the workflow drives
// the local engine's own decisions (engine.Core) deterministically, each
// agent attempt, each merge and each verification runs as an activity on
// any machine's aot worker, and the local state file and journal are kept
// as a projection of what the status query answers. The local engine
// (package engine) stays the default; this is aot run --engine temporal.
package durable

import (
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/local"
)

// Names registered with Temporal.
const (
	WorkflowName    = "aot.Loop"
	AttemptActivity = "aot.Attempt"
	MergeActivity   = "aot.Merge"
	// MergeBatchActivity merges several atoms' branches in one activity
	// (workflows from the "merge-batch" version on).
	MergeBatchActivity = "aot.MergeBatch"
	VerifyActivity     = "aot.Verify"
	CleanActivity      = "aot.Clean"
	DefaultTaskQueue   = "aot"
	SignalPause        = "pause"
	SignalResume       = "resume"
	SignalStop         = "stop" // the reason of an aot stop, sent before the cancellation
	UpdateRedirect     = "redirect"
	QueryStatus        = "status"
)

// LoopInput starts (or continues as new) a loop workflow.
type LoopInput struct {
	// State is the state file's bytes (state.Marshal): the whole loop,
	// objective, atoms, bindings, trail, control.
	State []byte `json:"state"`
	// Repo is the git remote every worker fetches from and pushes to; Base
	// the integration branch the atoms' branches merge into, in dependency
	// order; BaseCommit its commit when the loop started.
	Repo       string `json:"repo"`
	Base       string `json:"base"`
	BaseCommit string `json:"base_commit"`
	// Agent is what runs each role on the workers (as aot run's flags and
	// .claude/aot-agents.yaml choose it).
	Agent AgentChoice `json:"agent"`
	// Settings are aot run's choices for this run, whole (their JSON
	// fields sit at this level: max_parallel, agent_timeout, ...; each is
	// optional, so that recorded histories still read). The Core and the
	// activities read them from here.
	engine.Settings
	// ContinueAfter is how many activities (attempts and merges) one
	// workflow run finishes before it continues as new (0: 2,000, about
	// 12,000 history events); the server's suggestion and a history of
	// 10,000 events also end a run.
	ContinueAfter int `json:"continue_after,omitempty"`
	// Project is the project's folder in the repository ("" for its
	// root, slash-separated): where agents and checks run in a worker's
	// checkout. StateFile is the state file's path in the repository.
	Project   string `json:"project,omitempty"`
	StateFile string `json:"state_file,omitempty"`
	// Carried across Continue-As-New.
	Carry Carry `json:"carry"`
}

// AgentChoice names the backend per role, as aot run's flags do.
type AgentChoice struct {
	Agent   string            `json:"agent,omitempty"`   // claude, codex, gemini, exec, ...
	Model   string            `json:"model,omitempty"`   //
	Command string            `json:"command,omitempty"` // the exec agent's command
	Roles   map[string]string `json:"roles,omitempty"`   // role -> AGENT[:MODEL]
}

// Carry is what a workflow hands to its continuation.
type Carry struct {
	// Core is the coordinator's bookkeeping beyond the state (spend,
	// clocks, pause, strategies, backoffs, the sweep); nil when the loop
	// starts.
	Core *engine.Carry `json:"core,omitempty"`
	Runs int           `json:"runs"` // how many workflow runs this loop has had
	// Head is the integration branch's commit when the run ended.
	Head string `json:"head,omitempty"`
	// Events is the sequence number of the last event recorded.
	Events int `json:"events,omitempty"`
	// Logs are the agents' logs the workflow still keeps for the status
	// query (see Status.Logs); LogSeq numbers the last one.
	Logs   []AgentLog `json:"logs,omitempty"`
	LogSeq int        `json:"log_seq,omitempty"`
}

// PauseRequest is SignalPause's payload: Kill cancels the running attempts
// (their atoms go back to pending, not charged); otherwise they finish.
// SignalResume's payload is a ResumeRequest (or nothing).
type PauseRequest struct {
	Kill   bool   `json:"kill"`
	Reason string `json:"reason,omitempty"`
}

// StopRequest is SignalStop's payload: the loop stops as a manual stop
// with this reason (aot stop --reason), as it does when cancelled.
type StopRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ResumeRequest is SignalResume's payload.
type ResumeRequest struct {
	Reason string `json:"reason,omitempty"`
}

// AttemptInput is one agent run on one atom, in its own worktree at
// BaseCommit (the integration branch's head when the attempt was decided).
type AttemptInput struct {
	Loop       string        `json:"loop"` // the workflow id
	Repo       string        `json:"repo"`
	BaseCommit string        `json:"base_commit"`
	Branch     string        `json:"branch"` // where the worker pushes the atom's commit: aot/<loop>/<atom>-<attempt>
	Task       agent.Task    `json:"task"`
	Agent      AgentChoice   `json:"agent"`
	Timeout    time.Duration `json:"timeout"`
	// Hold lets a worker that serves a task queue of its own keep the
	// commit in its clone instead of pushing Branch, and say so in
	// AttemptResult.HeldOn: the merge then runs on that worker, and the
	// commit never crosses the network (absent from workflows of earlier
	// versions, and ignored by earlier workers: they push).
	Hold bool `json:"hold,omitempty"`
}

// AttemptResult is the attempt's outcome; a failed attempt is a result, not
// an activity error (activity errors are infrastructure: the worker died).
type AttemptResult struct {
	Result agent.Result `json:"result"`
	Kind   agent.Kind   `json:"kind,omitempty"` // why it failed; empty on success
	Reason string       `json:"reason,omitempty"`
	Commit string       `json:"commit,omitempty"` // the pushed commit on Branch (or the held one); empty when nothing changed
	// HeldOn is the task queue of the worker that holds Commit in its
	// clone (AttemptInput.Hold) and merges it there; empty: Commit is on
	// Branch on the remote.
	HeldOn string   `json:"held_on,omitempty"`
	Files  []string `json:"files,omitempty"` // what the commit changed, relative to the project's folder
	// Base is the commit the attempt's commit was made on (its parent),
	// RepoFiles what it changed relative to the repository's root: a merge
	// of Commit needs no git process to learn them (absent from histories of
	// earlier versions: the merge asks git).
	Base      string   `json:"base,omitempty"`
	RepoFiles []string `json:"repo_files,omitempty"`
	// Unclaimed are changed files the agent did not name; Missing the
	// names it gave that changed nothing (workspace.Merge's).
	Unclaimed []string `json:"unclaimed,omitempty"`
	Missing   []string `json:"missing,omitempty"`
	// ClaimsUnchanged: the agent named files and its commit changed none
	// of them. Unless its atom says expect_changes: false, the attempt is
	// no_change and its commit is not merged (absent from histories of
	// earlier versions: false, merged as before).
	ClaimsUnchanged bool   `json:"claims_unchanged,omitempty"`
	Worker          string `json:"worker"` // host and pid of the worker that ran it
	Unknown         bool   `json:"usage_unknown,omitempty"`
	// RetryAfter is how long the provider asked to wait (rate limits).
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Refused: the worker does not run the loop's choice of agent (a
	// RefusedError, in Reason); the loop stops.
	Refused bool `json:"refused,omitempty"`
	// Log is what the agent printed during this activity (absent from
	// histories of earlier versions).
	Log *AgentLog `json:"log,omitempty"`
}

// AgentLog is what an agent printed during one activity on a worker: the
// part of its log file there that the activity wrote, at most
// MaxAgentLog bytes of it (the end, after a line that says how much was
// cut). The client appends it to the log of the same name in its own
// logs folder, where aot logs reads it.
type AgentLog struct {
	// Seq numbers the logs of a loop, in the order the workflow took them
	// (0 in an activity's result).
	Seq  int    `json:"seq,omitempty"`
	Name string `json:"name"` // the log's file name, as history.LogName makes it
	Text string `json:"text"`
}

// MergeInput merges an atom's branch into the integration branch.
type MergeInput struct {
	Repo   string `json:"repo"`
	Base   string `json:"base"`
	Branch string `json:"branch"`
	Atom   string `json:"atom"`
	// Loop and Attempt name the merged commit's trailers (when empty, as a
	// workflow of an earlier version leaves them: from Branch); Message is
	// its message (the worker's summary).
	Loop    string `json:"loop,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Message string `json:"message,omitempty"`
	// Project and StateFile, as in LoopInput: the engine's files there are
	// never committed.
	Project   string `json:"project,omitempty"`
	StateFile string `json:"state_file,omitempty"`
}

// MergeResult is the integration branch after the merge, or a conflict
// (nothing merged; the atom is retried on the new base).
type MergeResult struct {
	Commit   string   `json:"commit"`
	Conflict bool     `json:"conflict"`
	Files    []string `json:"files,omitempty"`
	// Error, in a MergeBatchResult, is why this atom's merge failed (its
	// branch is gone and nothing merged it); the others' stand.
	Error string `json:"error,omitempty"`
}

// MergeBatchInput merges several atoms' branches into the integration
// branch, in the order of Atoms, in one activity.
type MergeBatchInput struct {
	Repo string `json:"repo"`
	Base string `json:"base"`
	Loop string `json:"loop"`
	// Project and StateFile, as in MergeInput.
	Project   string      `json:"project,omitempty"`
	StateFile string      `json:"state_file,omitempty"`
	Atoms     []MergeAtom `json:"atoms"`
	// Head is the integration branch's head as the workflow last merged
	// it: a worker that pushed that head itself need not fetch (absent
	// from workflows of earlier versions).
	Head string `json:"head,omitempty"`
}

// MergeAtom is one atom's branch in a MergeBatchInput.
type MergeAtom struct {
	Branch  string `json:"branch"`
	Atom    string `json:"atom"`
	Attempt int    `json:"attempt"`
	Message string `json:"message,omitempty"`
	// Commit, Base and Files are the attempt's (AttemptResult's Commit,
	// Base and RepoFiles): when the branch holds Commit, they are what the
	// merge would otherwise ask git.
	Commit string   `json:"commit,omitempty"`
	Base   string   `json:"base,omitempty"`
	Files  []string `json:"files,omitempty"`
	// Held: Commit is in the merging worker's clone (AttemptResult.HeldOn),
	// not on Branch.
	Held bool `json:"held,omitempty"`
}

// MergeBatchResult is the integration branch after the batch (Commit) and
// one result per atom, in the input's order: the commit that merged it,
// or a conflict, or an error.
type MergeBatchResult struct {
	Commit string        `json:"commit"`
	Atoms  []MergeResult `json:"atoms"`
}

// CleanInput deletes the branches of Repo whose names start with Prefix,
// except Keep.
type CleanInput struct {
	Repo   string `json:"repo"`
	Prefix string `json:"prefix"`
	Keep   string `json:"keep"`
}

// VerifyInput runs the base case on the integration branch's head, in
// the project's folder; with Judge, judged checks go to the loop's agent
// in the judge role on the worker.
type VerifyInput struct {
	Repo    string        `json:"repo"`
	Commit  string        `json:"commit"`
	State   []byte        `json:"state"`
	Project string        `json:"project,omitempty"`
	Judge   bool          `json:"judge,omitempty"`
	Agent   AgentChoice   `json:"agent"`
	Timeout time.Duration `json:"timeout,omitempty"` // per judge
	// CheckTimeout bounds each base-case command without a timeout of
	// its own (aot run --check-timeout; 0: the default).
	CheckTimeout time.Duration `json:"check_timeout,omitempty"`
	Loop         string        `json:"loop,omitempty"`
	// StateFile is the state file's path in the repository (for the
	// project's own judge template).
	StateFile string `json:"state_file,omitempty"`
}

// VerifyResult is the base case's report with what its judge did.
type VerifyResult = local.CheckReport

// Status is what the status query answers.
type Status struct {
	State  []byte `json:"state"` // the current state, state.Marshal
	Paused bool   `json:"paused"`
	// Pause is the pause in force: since when, why, whether it killed the
	// running attempts.
	Pause     *engine.PauseInfo `json:"pause,omitempty"`
	Running   []Running         `json:"running"`
	Usage     agent.Usage       `json:"usage"`
	Iteration int               `json:"iteration"`
	Done      bool              `json:"done"`
	Outcome   *Outcome          `json:"outcome,omitempty"`
	// Events are the loop's journal events after the query's "since"
	// (at most the last eventRing); EventSeq numbers the last one.
	Events   []journal.Event `json:"events,omitempty"`
	EventSeq int             `json:"event_seq"`
	// Logs are the agents' logs after the query's second argument (at
	// most the last logRingCount, logRingBytes in all); LogSeq numbers
	// the last one.
	Logs   []AgentLog `json:"logs,omitempty"`
	LogSeq int        `json:"log_seq,omitempty"`
}

// Running is an attempt in flight.
type Running struct {
	Role    string    `json:"role,omitempty"`
	Atom    string    `json:"atom"`
	Attempt int       `json:"attempt"`
	Started time.Time `json:"started"`
}

// Outcome is how the loop ended (the same reasons and exit codes as the
// local engine's).
type Outcome struct {
	Reason   string `json:"reason"`
	ExitCode int    `json:"exit_code"`
	Message  string `json:"message"`
	// Run is the whole outcome as a local run reports it (iterations,
	// usage, elapsed, ...), when the loop ended in the workflow's Core;
	// absent from workflows that ended before it was recorded.
	Run *engine.Outcome `json:"run,omitempty"`
}
