package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/local"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/workspace"
)

// The client side: aot run --engine temporal starts (or finds) the loop's
// workflow and stays attached, keeping the local state file in step with
// the workflow's; the other local commands find the workflow through a
// marker beside the journal and talk to it.

// Marker says that a state file's loop runs on Temporal.
type Marker struct {
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	Namespace  string    `json:"namespace"`
	Address    string    `json:"address"`
	TaskQueue  string    `json:"task_queue"`
	Repo       string    `json:"repo"`
	Base       string    `json:"base"`
	Started    time.Time `json:"started"`
	// Note says what a start found and did about it (a loop going on
	// from its integration branch's earlier work); not kept.
	Note string `json:"-"`
	// stateFile is where the marker was read or written.
	stateFile string
}

// seen is the sequence number of the last workflow event in the local
// journal (0: none, or the marker was not read from a state file).
func (m Marker) seen() int {
	if m.stateFile == "" {
		return 0
	}
	return readSeq(seqPath(m.stateFile))
}

func seqPath(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "temporal.seq")
}

func markerPath(stateFile string) string { return journal.TemporalMarker(stateFile) }

// ReadMarker returns the marker of stateFile's loop, if it runs on Temporal.
func ReadMarker(stateFile string) (Marker, bool) {
	data, err := os.ReadFile(markerPath(stateFile))
	if err != nil {
		return Marker{}, false
	}
	var m Marker
	if json.Unmarshal(data, &m) != nil || m.WorkflowID == "" {
		return Marker{}, false
	}
	m.stateFile = stateFile
	return m, true
}

func writeMarker(stateFile string, m Marker) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(journal.DirFor(stateFile), journal.DirMode); err != nil {
		return err
	}
	return state.WriteFile(markerPath(stateFile), data, journal.FileMode)
}

// ForgetMarker removes the marker once the workflow has ended.
func ForgetMarker(stateFile string) { _ = os.Remove(markerPath(stateFile)) }

// StartOptions are aot run's for the Temporal engine.
type StartOptions struct {
	StateFile string
	TaskQueue string
	Remote    string // the git remote workers use; default origin
	Agent     AgentChoice
	// Settings are the run's own choices, carried whole in LoopInput.
	engine.Settings
	Address   string // for the marker: where the client connected
	Namespace string
	// Attach is a workflow to reattach to on purpose (aot run --attach
	// ID), whichever loop it runs: its state is projected into StateFile.
	Attach string
}

// Input is in with what aot run chose for the loop: its agents and its
// settings, whole. Start starts the workflow with it.
func (o StartOptions) Input(in LoopInput) LoopInput {
	in.Agent, in.Settings = o.Agent, o.Settings
	return in
}

// ErrNoRemote: workers on other machines need a git remote to fetch from.
var ErrNoRemote = errors.New("the Temporal engine needs a git remote the workers can reach")

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// Start starts the loop's workflow, or finds it running (a second aot run
// of the same state file reattaches). The loop's id is given to the state
// file first, if it has none. The integration branch aot/<workflow>/integration
// is pushed to the remote from the project's HEAD when the remote has no
// such branch; when it has one, an earlier workflow of this same loop
// merged there, and the loop goes on from its tip (Marker.Note says so).
// No branch is ever forced: one that appears meanwhile refuses the start.
func Start(ctx context.Context, c client.Client, o StartOptions) (Marker, bool, error) {
	root := state.ProjectRoot(o.StateFile)
	top, err := git(root, "rev-parse", "--show-toplevel")
	if err != nil {
		return Marker{}, false, fmt.Errorf("%w: %s is not in a git repository", ErrNoRemote, root)
	}
	remote := o.Remote
	if remote == "" {
		remote = "origin"
	}
	repo, err := git(top, "remote", "get-url", remote)
	if err != nil {
		return Marker{}, false, fmt.Errorf("%w (git remote %q: add one with git remote add %s URL)", ErrNoRemote, remote, remote)
	}
	if o.Attach != "" {
		return attach(ctx, c, o, repo)
	}
	abs, _ := filepath.Abs(o.StateFile)
	rel, err := filepath.Rel(top, abs)
	if err != nil {
		rel = abs
	}
	store := state.NewStore(o.StateFile)
	s, err := store.Read()
	if err != nil {
		return Marker{}, false, err
	}
	if s.Control.LoopID != "" {
		// A resumed loop: its own workflow, or the one a person attached
		// this state file to (its loop id is then that workflow's).
		ids := []string{WorkflowID(s.Control.LoopID, o.Namespace, o.StateFile)}
		if mk, ok := ReadMarker(o.StateFile); ok && mk.WorkflowID != ids[0] && ofLoop(mk.WorkflowID, s.Control.LoopID) {
			ids = append(ids, mk.WorkflowID)
		}
		for _, id := range ids {
			if m, ok := running(ctx, c, id); ok {
				m.Namespace, m.Address, m.TaskQueue, m.Repo, m.Base, m.stateFile = o.Namespace, o.Address, o.TaskQueue, repo, integrationBranch(id), o.StateFile
				return m, true, writeMarker(o.StateFile, m)
			}
		}
	}
	if missing := s.Missing(); len(missing) > 0 {
		return Marker{}, false, &engine.NotReadyError{Missing: missing}
	}
	if s, err = local.EnsureLoopID(store, s); err != nil {
		return Marker{}, false, err
	}
	id := WorkflowID(s.Control.LoopID, o.Namespace, o.StateFile)
	m := Marker{WorkflowID: id, Namespace: o.Namespace, Address: o.Address, TaskQueue: o.TaskQueue, Repo: repo, Base: integrationBranch(id), stateFile: o.StateFile}
	head, err := git(top, "rev-parse", "HEAD")
	if err != nil {
		return Marker{}, false, fmt.Errorf("the repository needs a commit: %w", err)
	}
	base, err := integrationBase(ctx, top, repo, m.Base, head)
	if err != nil {
		return Marker{}, false, err
	}
	if base != head {
		m.Note = fmt.Sprintf("branch %s of %s already holds this loop's earlier work: the loop goes on from its tip %.12s", m.Base, repo, base)
	}
	s.Control.Status = state.ControlRunning
	project, _ := filepath.Rel(top, root)
	if project == "." || strings.HasPrefix(project, "..") {
		project = ""
	}
	in := o.Input(LoopInput{State: state.Marshal(s), Repo: repo, Base: m.Base, BaseCommit: base,
		Project: filepath.ToSlash(project), StateFile: filepath.ToSlash(rel)})
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: o.TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		Memo:                  memoOf(s, repo, rel),
	}, WorkflowName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			m.RunID = started.RunId
			return m, true, writeMarker(o.StateFile, m)
		}
		return Marker{}, false, fmt.Errorf("start the workflow: %w", err)
	}
	m.RunID = run.GetRunID()
	m.Started = time.Now()
	_ = os.Remove(seqPath(o.StateFile)) // a new workflow numbers its events afresh
	_ = os.Remove(logSeqPath(o.StateFile))
	return m, false, writeMarker(o.StateFile, m)
}

// Memo keys: what Temporal's UI and CLI show of a loop's workflow
// (temporal workflow describe), read without the codec.
const (
	MemoRepository = "repository"
	MemoStateFile  = "state_file"
	MemoGoal       = "goal"
	MemoLoopID     = "loop_id"
	MemoHost       = "host"
)

// memoOf names the loop a workflow runs: its repository (the git remote
// the workers use), its state file there and on which machine it was
// started, its goal (one line) and its loop id.
func memoOf(s *state.State, repo, stateFile string) map[string]any {
	host, _ := os.Hostname()
	return map[string]any{
		MemoRepository: repo, MemoStateFile: filepath.ToSlash(stateFile), MemoHost: host,
		MemoGoal: dag.OneLine(s.Objective.Goal, 500), MemoLoopID: s.Control.LoopID,
	}
}

// integrationBase is where the loop's integration branch starts: its tip
// on the remote when it exists there (the loop's own, from an earlier
// workflow of it), else head, pushed as a new branch, only if the remote
// still has none.
func integrationBase(ctx context.Context, dir, repo, branch, head string) (string, error) {
	have, err := workspace.RemoteBranches(ctx, dir, repo, branch)
	if err != nil {
		return "", err
	}
	if tip := have[branch]; tip != "" {
		return tip, nil
	}
	up := workspace.RemoteUpdate{Ref: "refs/heads/" + branch, Commit: head}
	if err := workspace.Push(ctx, dir, repo, up); err != nil {
		return "", fmt.Errorf("create the integration branch %s (never forced over a branch that appeared meanwhile): %w", branch, err)
	}
	return head, nil
}

// running returns a marker of workflow id when it runs.
func running(ctx context.Context, c client.Client, id string) (Marker, bool) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil || d.WorkflowExecutionInfo.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return Marker{}, false
	}
	return Marker{WorkflowID: id, RunID: d.WorkflowExecutionInfo.GetExecution().GetRunId(), Started: d.WorkflowExecutionInfo.GetStartTime().AsTime()}, true
}

// attach reattaches the state file to the workflow o.Attach, on purpose:
// the attached aot run projects that workflow's loop into the state file.
func attach(ctx context.Context, c client.Client, o StartOptions, repo string) (Marker, bool, error) {
	d, err := c.DescribeWorkflowExecution(ctx, o.Attach, "")
	if err != nil {
		return Marker{}, false, fmt.Errorf("--attach %s: no such workflow in namespace %q: %w", o.Attach, o.Namespace, err)
	}
	info := d.WorkflowExecutionInfo
	m := Marker{WorkflowID: o.Attach, RunID: info.GetExecution().GetRunId(), Started: info.GetStartTime().AsTime(),
		Namespace: o.Namespace, Address: o.Address, TaskQueue: info.GetTaskQueue(), Repo: repo, Base: integrationBranch(o.Attach), stateFile: o.StateFile}
	if m.TaskQueue == "" {
		m.TaskQueue = o.TaskQueue
	}
	return m, true, writeMarker(o.StateFile, m)
}

// Query asks the workflow for its status, with the journal events and
// the agents' logs it keeps that the local journal and logs folder do not
// have yet.
func Query(ctx context.Context, c client.Client, m Marker) (Status, error) {
	v, err := c.QueryWorkflow(ctx, m.WorkflowID, "", QueryStatus, m.seen(), m.logsSeen())
	if err != nil {
		return Status{}, err
	}
	var st Status
	if err := v.Get(&st); err != nil {
		return Status{}, err
	}
	return st, nil
}

// Project writes the workflow's state into the local state file through
// the store, and appends the events the local journal lacks, so that aot
// status, aot logs and the dashboard show the loop as the workflow has it.
func Project(stateFile string, st Status) error {
	next, err := state.Parse(st.State)
	if err != nil {
		return fmt.Errorf("the workflow's state: %w", err)
	}
	// The workflow's state is the truth, reached by transitions the local
	// file may not have seen (pending to resolved between two queries):
	// no transition check, as for the local engine's own writes.
	if err := os.MkdirAll(journal.DirFor(stateFile), journal.DirMode); err != nil {
		return err
	}
	lastPath := filepath.Join(journal.DirFor(stateFile), "temporal.last")
	var edited *HandEditError
	_, err = state.NewStore(stateFile).UpdateBatch(func(s *state.State) error {
		if last, err := os.ReadFile(lastPath); err == nil && !bytes.Equal(last, state.Marshal(s)) {
			// Changed since the last projection, by someone else than the
			// workflow: kept aside, and said, never lost in silence.
			kept := filepath.Join(journal.DirFor(stateFile), "hand-edit-"+time.Now().UTC().Format("20060102T150405.000")+".md")
			if err := state.WriteFile(kept, state.Marshal(s), journal.FileMode); err != nil {
				return err
			}
			edited = &HandEditError{Kept: kept}
		}
		state.CopyInto(s, next)
		if err := state.WriteFile(lastPath, state.Marshal(s), journal.FileMode); err != nil {
			return err
		}
		if err := appendLogs(stateFile, st); err != nil {
			return err
		}
		return appendEvents(stateFile, st)
	})
	if err == nil && edited != nil {
		return edited
	}
	return err
}

// projected says whether Project brought the file in step, err its answer.
func projected(err error) bool {
	var he *HandEditError
	return err == nil || errors.As(err, &he)
}

// HandEditError says that Project found the state file changed since its
// last projection (by hand, or by a command meant for a local loop) and
// replaced it with the workflow's state; the change is kept in Kept. A
// loop on Temporal changes with aot redirect.
type HandEditError struct{ Kept string }

// Notice is what aot serve shows of it.
func (e *HandEditError) Notice() string { return e.Error() }

func (e *HandEditError) Error() string {
	return "the state file was changed since the workflow's last projection; a loop on Temporal changes with aot redirect (a Temporal Update): the change is kept in " + e.Kept + ", and the file says what the workflow has"
}

// appendEvents appends st's events after the last one appended (their
// sequence numbers end at st.EventSeq), under the state file's lock.
func appendEvents(stateFile string, st Status) error {
	seqFile := seqPath(stateFile)
	last := readSeq(seqFile)
	if st.EventSeq < last {
		last = 0 // a new loop of the same workflow id
	}
	first := st.EventSeq - len(st.Events) + 1
	var todo []journal.Event
	for i, ev := range st.Events {
		if first+i > last {
			todo = append(todo, ev)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if err := appendJournal(stateFile, todo); err != nil {
		return err
	}
	return state.WriteFile(seqFile, []byte(strconv.Itoa(st.EventSeq)+"\n"), journal.FileMode)
}

// AttachOptions tune AttachWith.
type AttachOptions struct {
	Every time.Duration       // how often the workflow is queried
	Say   func(string)        // a line when the running attempts change
	Event func(journal.Event) // each journal event, once, as it reaches the local journal
}

// AttachWith keeps the local state file and journal in step with the
// workflow until it ends (its outcome) or ctx ends (a detach: nil outcome).
func AttachWith(ctx context.Context, c client.Client, m Marker, stateFile string, o AttachOptions) (*Outcome, error) {
	every, say := o.Every, o.Say
	if every <= 0 {
		every = time.Second
	}
	run := c.GetWorkflow(ctx, m.WorkflowID, "")
	done := make(chan error, 1)
	var out Outcome
	go func() { done <- run.Get(ctx, &out) }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last []byte
	lastRunning, lastErr := "", ""
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil {
				return nil, nil // detached
			}
			// The final state, for the local commands.
			if st, qerr := Query(context.Background(), c, m); qerr == nil {
				perr := Project(stateFile, st)
				if perr != nil && say != nil {
					say(perr.Error())
				}
				if projected(perr) && o.Event != nil {
					for _, ev := range st.Events {
						o.Event(ev)
					}
				}
			}
			if err != nil {
				if temporal.IsCanceledError(err) {
					return &Outcome{Reason: string(engine.ManualStop), ExitCode: engine.ManualStop.ExitCode(), Message: "manual stop: the workflow was cancelled"}, nil
				}
				return nil, err
			}
			return &out, nil
		case <-ctx.Done():
			return nil, nil
		case <-tick.C:
			st, err := Query(ctx, c, m)
			if err != nil {
				continue // the workflow may be between runs (Continue-As-New)
			}
			if !bytes.Equal(st.State, last) || len(st.Events) > 0 || len(st.Logs) > 0 {
				err := Project(stateFile, st)
				if err != nil && say != nil && err.Error() != lastErr {
					say("the local state file is behind the workflow: " + err.Error())
				}
				lastErr = ""
				if err != nil {
					lastErr = err.Error()
				}
				if projected(err) {
					last = st.State
					if o.Event != nil {
						for _, ev := range st.Events {
							o.Event(ev)
						}
					}
				}
			}
			// Temporal's retries of the activities, journaled once.
			if evs, err := JournalRetries(ctx, c, m, stateFile); err == nil && o.Event != nil {
				for _, ev := range evs {
					o.Event(ev)
				}
			}
			var names []string
			for _, r := range st.Running {
				names = append(names, fmt.Sprintf("%s#%d", r.Atom, r.Attempt))
			}
			if now := strings.Join(names, ", "); now != lastRunning && say != nil {
				if now == "" {
					now = "none"
				}
				say("running: " + now)
				lastRunning = now
			}
		}
	}
}

// Cancel stops the workflow: its running activities are cancelled (their
// agents killed by the workers) and it ends as a manual stop.
func Cancel(ctx context.Context, c client.Client, m Marker, reason string) error {
	// The reason goes first, as a signal: a cancellation carries none.
	if reason != "" {
		_ = c.SignalWorkflow(ctx, m.WorkflowID, "", SignalStop, StopRequest{Reason: reason})
	}
	return c.CancelWorkflow(ctx, m.WorkflowID, "")
}

// Signal sends pause or resume.
func Signal(ctx context.Context, c client.Client, m Marker, name string, arg any) error {
	return c.SignalWorkflow(ctx, m.WorkflowID, "", name, arg)
}

// Redirect sends the change as an Update and waits for the workflow's
// answer: accepted and applied, or refused with the reason.
func Redirect(ctx context.Context, c client.Client, m Marker, ch engine.Change) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: m.WorkflowID, UpdateName: UpdateRedirect, Args: []any{ch},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return &engine.RefusedError{Err: err}
	}
	if err := h.Get(ctx, nil); err != nil {
		return &engine.RefusedError{Err: err}
	}
	return nil
}

// Land brings a completed loop's work from the remote onto the branch the
// person's clone has checked out, as a local run lands its own
// (workspace.Manager.Land): the integration branch is fetched into the
// loop's local branch aot/<workflow>, and the person's branch is
// fast-forwarded only when it has not moved since and its working tree is
// clean; otherwise the work stays on that local branch and the Landing's
// message says how to take it. Call it only for a loop that completed.
func Land(ctx context.Context, stateFile string, m Marker) (workspace.Landing, error) {
	// Two aot run attached to one loop both see it complete: one lands,
	// the other then finds nothing left to land.
	if err := os.MkdirAll(journal.DirFor(stateFile), journal.DirMode); err != nil {
		return workspace.Landing{}, err
	}
	lock := flock.New(filepath.Join(journal.DirFor(stateFile), "temporal.land.lock"))
	if ok, err := lock.TryLockContext(ctx, 50*time.Millisecond); err != nil || !ok {
		return workspace.Landing{}, fmt.Errorf("land: %w", errors.Join(err, ctx.Err()))
	}
	defer lock.Unlock()
	root := state.ProjectRoot(stateFile)
	wm, err := workspace.Open(ctx, root, workspace.Options{LoopID: m.WorkflowID, StateFile: stateFile})
	if err != nil {
		return workspace.Landing{}, fmt.Errorf("land: %w", err)
	}
	if _, err := workspace.Git(ctx, root, "fetch", "--quiet", "--no-tags", m.Repo, "refs/heads/"+m.Base); err != nil {
		return workspace.Landing{}, fmt.Errorf("land: fetch %s: %w", m.Base, err)
	}
	out, err := workspace.Git(ctx, root, "rev-parse", "--verify", "FETCH_HEAD^{commit}")
	if err != nil {
		return workspace.Landing{}, fmt.Errorf("land: %w", err)
	}
	if _, err := workspace.Git(ctx, root, "update-ref", "refs/heads/"+wm.Branch(), strings.TrimSpace(string(out))); err != nil {
		return workspace.Landing{}, fmt.Errorf("land: %w", err)
	}
	if err := wm.Start(ctx); err != nil {
		return workspace.Landing{}, fmt.Errorf("land: %w", err)
	}
	return wm.Land(ctx)
}
