package durable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/prompt"
	"github.com/aot-loop/aot/internal/workspace"
)

// Activities are what an aot worker runs for the loop workflows: each agent
// attempt in a worktree of its own, its work pushed to the atom's branch;
// the merges of those branches into the integration branch; the base case
// on the integration branch. Register them with [Activities.Register] (as
// [RunWorker] does) so they carry the contract's names.
//
// A failed attempt is a result (AttemptResult.Kind); an activity error is
// the infrastructure's: the remote unreachable, the disk full. Errors that
// no retry can mend (a base commit the remote does not have, a state that
// does not parse) are non-retryable.
type Activities struct {
	// Cache holds one clone per repository, the running activities'
	// worktrees and the agents' logs. Workers may share it.
	Cache string
	// Identity names this worker in the attempts' results; default
	// pid@host, as Temporal's own.
	Identity string
	// NewAgent builds the agent the loop chose for a role, with the
	// folders of an attempt (AgentDirs).
	NewAgent func(ch AgentChoice, role agent.Role, dirs AgentDirs) (agent.Agent, error)
	// Heartbeat is how often a running activity tells Temporal it is alive
	// (default 5s). Temporal throttles heartbeats to its heartbeat timeout,
	// and a cancellation reaches the activity with a heartbeat's answer.
	Heartbeat time.Duration

	// OwnQueue is the task queue this worker alone serves, for the merges
	// of the commits it holds (held.go); "": it holds none, and pushes
	// every attempt's commit.
	OwnQueue string

	// handBack, set by RunWorker, answers for the activities a stopping
	// worker cuts short (shutdown.go); nil: the SDK answers.
	handBack *handBack
	holding  holding
}

// AgentDirs are the folders an attempt's agent uses on a worker: Logs for
// its logs (one file per attempt), Prompts for the project's own role
// templates in the attempt's checkout (.claude/aot-prompts beside the
// state file; "" or missing: the built-in ones).
type AgentDirs struct {
	Logs    string
	Prompts string
}

// dirsFor is where an attempt's agent logs and finds the project's
// prompts, given the checkout's state file ("" when unknown).
func (a *Activities) dirsFor(loop, stateFile string) AgentDirs {
	d := AgentDirs{Logs: filepath.Join(a.Cache, "logs", nameFor(loop))}
	if stateFile != "" {
		d.Prompts = filepath.Join(filepath.Dir(stateFile), prompt.OverrideDir)
	}
	return d
}

// Register registers the activities under the contract's names.
func (a *Activities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(handBackResult(a.handBack, a.Attempt), activity.RegisterOptions{Name: AttemptActivity})
	r.RegisterActivityWithOptions(handBackResult(a.handBack, a.Merge), activity.RegisterOptions{Name: MergeActivity})
	r.RegisterActivityWithOptions(handBackResult(a.handBack, a.MergeBatch), activity.RegisterOptions{Name: MergeBatchActivity})
	r.RegisterActivityWithOptions(handBackResult(a.handBack, a.Verify), activity.RegisterOptions{Name: VerifyActivity})
	r.RegisterActivityWithOptions(handBackError(a.handBack, a.Clean), activity.RegisterOptions{Name: CleanActivity})
}

// registerOwn registers on the worker of this worker's own queue what
// runs there: the merges of the commits it holds.
func (a *Activities) registerOwn(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(handBackResult(a.handBack, a.MergeBatch), activity.RegisterOptions{Name: MergeBatchActivity})
}

// DefaultHeartbeat is how often activities heartbeat; a workflow's
// HeartbeatTimeout must be a few times longer.
const DefaultHeartbeat = 5 * time.Second

// DefaultIdentity is pid@host, as Temporal names its workers.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s", os.Getpid(), host)
}

func (a *Activities) identity() string {
	if a.Identity != "" {
		return a.Identity
	}
	return DefaultIdentity()
}

// nonRetryable marks err as one no retry can mend.
func nonRetryable(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), "aot.NonRetryable", err)
}

// heartbeat records a heartbeat every a.Heartbeat until the returned func
// is called or ctx ends. The first goes after one interval, not at once:
// most merges and many attempts are over before it (each heartbeat is a
// write on the Temporal service), and until then the activity's id says
// what it does. Outside an activity (direct calls in
// tests) it does nothing. The context it returns ends with ctx, or when
// this worker must give the activity up (fence.go): the activity runs
// under it.
func (a *Activities) heartbeat(ctx context.Context, what string) (context.Context, func()) {
	if !activity.IsActivity(ctx) {
		return ctx, func() {}
	}
	every := a.Heartbeat
	if every <= 0 {
		every = DefaultHeartbeat
	}
	fctx, giveUp := context.WithCancelCause(ctx)
	f := a.fenceFor(ctx, every)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var sdkBeat time.Time
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				reached, err := f.check(ctx, what)
				if err != nil {
					giveUp(err)
					return
				}
				if reached && time.Since(sdkBeat) >= sdkBeatGap {
					// The SDK's heartbeat brings cancellations; it would
					// cancel the activity at its first failure too.
					activity.RecordHeartbeat(ctx, what)
					sdkBeat = time.Now()
				}
			}
		}
	})
	return fctx, func() {
		close(done)
		wg.Wait()
		giveUp(nil)
	}
}

// Attempt runs one agent attempt: the agent in a worktree of in.Repo at
// in.BaseCommit (killed, its process tree with it, when the activity is
// cancelled or its timeout passes); then, for a worker that succeeded,
// what it changed is committed as a local run commits it (workspace:
// never the engine's files, one commit on in.BaseCommit) and pushed to
// in.Branch (a retried attempt replaces what a dead worker pushed).
// Probes and planners read a checkout of in.BaseCommit, as a local run's
// read the merged work. Everything is removed however the attempt ends.
//
// In the task, a relative Workdir or StateFile is taken inside the
// checkout (the project's folder in the repository); an absolute Workdir,
// which names a folder on the machine that started the loop, is replaced
// by the checkout's root.
func (a *Activities) Attempt(ctx context.Context, in AttemptInput) (AttemptResult, error) {
	res := AttemptResult{Worker: a.identity()}
	if a.NewAgent == nil {
		return res, nonRetryable(errors.New("this worker builds no agents"))
	}
	what := fmt.Sprintf("atom %s attempt %d (%s)", in.Task.Atom.ID, in.Task.Attempt, in.Task.Role)
	ctx, stop := a.heartbeat(ctx, what)
	defer stop()
	if err := a.awaitPredecessor(ctx); err != nil {
		return res, err
	}

	c, err := a.cloneHaving(ctx, in.Repo, in.BaseCommit)
	if err != nil {
		return res, err
	}
	project := ""
	if !filepath.IsAbs(in.Task.Workdir) {
		project = in.Task.Workdir
	}
	task := in.Task
	var m *workspace.Manager
	root, wa := "", workspace.Attempt{}
	if task.Role == agent.Worker {
		// Its own worktree in the worker's clone, and nothing else.
		t, err := a.newAttemptTree(ctx, c, in.BaseCommit, in.Loop, project, in.Task.StateFile, task.Atom.ID, task.Attempt)
		if err != nil {
			return res, err
		}
		defer t.remove(ctx)
		ctx = t.sc.noteTrees(ctx) // the agent's process trees, for a sweep (orphans.go)
		m, wa = t.m, t.a
		root, task.Workdir = wa.Path, wa.Dir
	} else {
		sc, err := a.newScratch(ctx, c, in.BaseCommit)
		if err != nil {
			return res, err
		}
		defer sc.remove()
		ctx = sc.noteTrees(ctx) // the agent's process trees, for a sweep (orphans.go)
		if m, err = sc.manager(ctx, in.Loop, project, in.Task.StateFile); err != nil {
			return res, err
		}
		task.Workdir = m.IntegrationDir()
		root = rootOf(task.Workdir, project)
	}
	if task.StateFile != "" && !filepath.IsAbs(task.StateFile) {
		task.StateFile = filepath.Join(root, filepath.FromSlash(task.StateFile))
	}
	dirs := a.dirsFor(in.Loop, task.StateFile)
	ag, err := a.NewAgent(in.Agent, task.Role, dirs)
	if err != nil {
		// The loop's choice of agent cannot be built (an unknown backend,
		// an exec agent without a command): every worker would say so.
		res.Kind, res.Reason = agent.KindCrash, fmt.Sprintf("worker %s cannot build the %s agent: %v", res.Worker, task.Role, err)
		if refused := (*RefusedError)(nil); errors.As(err, &refused) {
			res.Refused, res.Reason = true, fmt.Sprintf("worker %s %v", res.Worker, err)
		}
		return res, nil
	}

	actx, cancel := ctx, context.CancelFunc(func() {})
	if in.Timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, in.Timeout)
	}
	mark := markAttemptLog(dirs, task.Atom.ID, string(task.Role), task.Attempt)
	r, err := ag.Run(actx, task)
	res.Log = mark.since(res.Worker)
	timedOut := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	if ctx.Err() != nil {
		// Cancelled by the workflow, or this worker is stopping: Temporal
		// records the cancellation (or retries the attempt elsewhere).
		return res, ctx.Err()
	}
	res.Result = r
	if err != nil {
		res.Kind, res.Reason = agent.KindCrash, err.Error()
		var ae *agent.AttemptError
		if errors.As(err, &ae) {
			if ae.Kind != "" {
				res.Kind = ae.Kind
			}
			res.Result.Usage = ae.Usage
			res.RetryAfter = ae.RetryAfter
		}
		if timedOut {
			res.Kind = agent.KindTimeout
			res.Reason = fmt.Sprintf("the agent did not finish within %s: %v", in.Timeout, err)
		}
		res.Unknown = !res.Result.Usage.Known
		return res, nil
	}
	res.Unknown = !r.Usage.Known
	if task.Role != agent.Worker || !r.OK(task.Role) {
		return res, nil // nothing to keep: an answer, or a worker that said no
	}

	mr, err := m.Finish(ctx, wa, r.Summary, r.Artifacts)
	if err != nil {
		return res, fmt.Errorf("commit the attempt's work: %w", err)
	}
	res.Files, res.Unclaimed, res.Missing = mr.Changed, mr.Unclaimed, mr.Missing
	res.Base, res.RepoFiles = in.BaseCommit, mr.RepoChanged
	res.ClaimsUnchanged = len(mr.Changed) > 0 && engine.ClaimsUnchanged(mr.Changed, engine.ClaimsIn(wa.Dir, r.Artifacts))
	if mr.Commit == "" {
		return res, nil // it changed nothing: nothing to merge
	}
	if in.Branch == "" {
		return res, nonRetryable(errors.New("no branch to push the attempt's work to"))
	}
	if in.Hold && a.OwnQueue != "" && a.holding.hold(in.Repo, in.Branch, mr.Commit) {
		// Kept in the clone, for a merge on this worker (held.go).
		res.Commit, res.HeldOn = mr.Commit, a.OwnQueue
		return res, nil
	}
	// The attempt's branch is this loop's alone; a retried attempt
	// replaces what its dead predecessor pushed, and nothing else: its
	// push, which expects no branch, is refused, and is tried again on
	// what the clone then fetches; any other refusal is the activity's
	// failure.
	// A first try finds no branch; a retry's push, refused, is tried again.
	up := workspace.RemoteUpdate{Ref: "refs/heads/" + in.Branch, Commit: mr.Commit}
	if err := workspace.Push(ctx, c.dir, in.Repo, up); err != nil {
		if ferr := c.fetch(ctx); ferr != nil {
			return res, fmt.Errorf("push %s: %w", in.Branch, errors.Join(err, ferr))
		}
		now := c.remoteBranch(ctx, in.Branch)
		if now == up.Expect {
			return res, fmt.Errorf("push %s: %w", in.Branch, err)
		}
		up.Expect = now
		if err := workspace.Push(ctx, c.dir, in.Repo, up); err != nil {
			return res, fmt.Errorf("push %s: %w", in.Branch, err)
		}
	}
	c.pushedTo(map[string]string{in.Branch: mr.Commit})
	res.Commit = mr.Commit
	return res, nil
}

// Clean deletes the branches of in.Repo under in.Prefix but in.Keep: the
// atoms' branches a loop leaves when it ends. A branch that moved since it
// was listed stays.
func (a *Activities) Clean(ctx context.Context, in CleanInput) error {
	if in.Prefix == "" || !strings.HasSuffix(in.Prefix, "/") {
		return nonRetryable(fmt.Errorf("clean: %q is not a folder of branches", in.Prefix))
	}
	c, err := a.openClone(ctx, in.Repo)
	if err != nil {
		return err
	}
	branches, err := workspace.RemoteBranches(ctx, c.dir, in.Repo, in.Prefix)
	if err != nil {
		return err
	}
	var errs []error
	for name, commit := range branches {
		if name != in.Keep {
			// One push each: a branch that moved does not keep the others.
			errs = append(errs, workspace.Push(ctx, c.dir, in.Repo, workspace.RemoteUpdate{Ref: "refs/heads/" + name, Expect: commit}))
		}
	}
	return errors.Join(errs...)
}
