package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/workspace"
)

// isolation is the engine's git work for one run: nil when agents share
// the project root.
type isolation struct {
	m       *workspace.Manager
	merging sync.Mutex // merges in the order their results arrive
}

// isoMode is what a run's isolation means for its kernel.
type isoMode struct {
	serial      bool   // workers one at a time in the project root
	integration string // where agents and checks read the merged work; "": the project root
}

// openIsolation decides the run's isolation and prepares it: the orphans of
// a crashed run are removed, and the integration worktree (journaled first)
// is created.
func (l *localHost) openIsolation(ctx context.Context) (isoMode, error) {
	mode := l.opts.Isolation
	if mode == "" {
		mode = engine.IsolationShared
	}
	switch mode {
	case engine.IsolationShared:
		return isoMode{}, nil
	case engine.IsolationNone:
		l.serial = true
		return isoMode{serial: true}, nil
	case engine.IsolationAuto, engine.IsolationWorktree:
	default:
		return isoMode{}, fmt.Errorf("unknown isolation %q (want auto, worktree, none or shared)", mode)
	}
	m, err := workspace.Open(ctx, l.opts.Workdir, workspace.Options{LoopID: l.s.Control.LoopID, KeepFailed: l.opts.KeepFailed, StateFile: l.opts.StateFile, Dir: l.opts.WorktreeDir})
	if errors.Is(err, workspace.ErrNotGit) && mode == engine.IsolationAuto {
		l.say("not a git repository with a commit: workers run one at a time in the project root (git init and commit to run them in parallel, isolated)")
		l.event(journal.Event{Type: journal.Workspace, Reason: "not a git repository: no isolation, one worker at a time"})
		l.serial = true
		return isoMode{serial: true}, nil
	}
	if err != nil {
		return isoMode{}, err
	}
	orphans, err := m.CleanOrphans(ctx, nil)
	if err != nil {
		return isoMode{}, err
	}
	for _, o := range orphans {
		l.event(journal.Event{Type: journal.Worktree, Atom: o.Atom, Reason: "removed: left by a run that ended without cleaning up"}.With(journal.WorktreeData{Path: o.Path, Branch: o.Branch}))
	}
	l.event(journal.Event{Reason: "a git worktree per worker attempt"}.With(journal.WorkspaceData{Integration: m.IntegrationDir(), Branch: m.Branch()}))
	if err := l.jr.Sync(); err != nil {
		return isoMode{}, err
	}
	if err := m.Start(ctx); err != nil {
		return isoMode{}, err
	}
	l.iso = &isolation{m: m}
	l.integration = m.IntegrationDir()
	if sensitiveDir(m.WorktreesDir()) {
		l.say("warning: the worktrees are below a .git or .claude folder (%s), where Claude Code refuses every write; choose another folder with --worktree-dir", m.WorktreesDir())
	}
	l.say("isolation: a git worktree per worker attempt, merged into %s (worktrees in %s)", m.Branch(), m.WorktreesDir())
	return isoMode{integration: l.integration}, nil
}

// sensitiveDir reports whether dir is below a .git or .claude folder.
func sensitiveDir(dir string) bool {
	for _, part := range strings.Split(filepath.ToSlash(dir), "/") {
		if part == ".git" || part == ".claude" {
			return true
		}
	}
	return false
}

// isolatedRun runs a worker attempt in its own worktree: created (after the
// journal names it), the agent run there, its changes committed and merged
// when it succeeded, the worktree removed whatever happened.
func (l *localHost) isolatedRun(ctx context.Context, taskID int, in agent.Task, a *attemptMerge) (agent.Result, error) {
	m := l.iso.m
	w := m.Plan(in.Atom.ID, taskID)
	a.attempt = w
	_ = l.jr.Append(journal.Event{Atom: in.Atom.ID, Attempt: in.Attempt, Reason: "created"}.With(journal.WorktreeData{Path: w.Path, Branch: w.Branch}))
	if err := l.jr.Sync(); err != nil {
		return agent.Result{}, &agent.AttemptError{Reason: "journal: " + err.Error()}
	}
	cleanup := func(ok bool) {
		cctx := context.WithoutCancel(ctx)
		if ok {
			_ = m.Remove(cctx, w)
			return
		}
		if kept, _ := m.Abandon(cctx, w); kept {
			a.kept = true
			_ = l.jr.Append(journal.WorktreeKept(journal.Event{Atom: in.Atom.ID, Attempt: in.Attempt}, journal.WorktreeData{Path: w.Path, Branch: w.Branch}))
		}
	}
	if err := m.Create(ctx, w); err != nil {
		cleanup(false)
		return agent.Result{}, &agent.AttemptError{Reason: "could not create the attempt's worktree: " + err.Error()}
	}
	in.Workdir = w.Dir
	res, err := l.opts.Agent.Run(ctx, in)
	if err != nil || ctx.Err() != nil || !res.OK(agent.Worker) || agent.CheckBounds(res) != nil {
		cleanup(false)
		return res, err
	}
	l.iso.merging.Lock()
	msg := fmt.Sprintf("%s: %s", in.Atom.ID, firstLine(in.Atom.Description))
	// The merge's intent is journaled, synced, before the merge: a run
	// that dies during it finds, resumed, whether git holds the merge.
	intent := func(commit string, changed []string) error {
		// A worker that changed none of the files it claimed is judged
		// before its merge, so that what it did change never reaches the
		// integration branch (a liar's work never lands).
		if err := engine.NoChangeBeforeMerge(a.expect, changed, engine.ClaimsIn(w.Dir, res.Artifacts), l.denied.peek(taskID), res.Denials); err != nil {
			return err
		}
		err := l.jr.Append(journal.MergeIntent(journal.Event{Atom: in.Atom.ID, Attempt: in.Attempt},
			journal.WorktreeData{Number: w.Number, Branch: w.Branch, Commit: commit, Changed: changed, Summary: res.Summary}))
		if err == nil {
			err = l.jr.Sync()
		}
		return err
	}
	mr, merr := m.FinishNoting(context.WithoutCancel(ctx), w, msg, res.Artifacts, intent)
	l.iso.merging.Unlock()
	a.merge = &mr
	if merr != nil {
		cleanup(false)
		var judged *agent.AttemptError
		if errors.As(merr, &judged) {
			judged.Usage = res.Usage
			return agent.Result{}, judged
		}
		var left *workspace.LeftBranchError
		if errors.As(merr, &left) {
			return agent.Result{}, &agent.AttemptError{Reason: left.Error(), Usage: res.Usage}
		}
		return agent.Result{}, &agent.AttemptError{Reason: "could not merge the attempt: " + merr.Error(), Usage: res.Usage}
	}
	cleanup(!mr.Conflict)
	return res, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return dag.OneLine(s, 72)
}

// land puts the merged work where the person will find it: on the branch
// the run started from when the loop completed (its base case passed);
// otherwise it stays on the loop's branch.
func (l *localHost) land(ctx context.Context, out *engine.Outcome) string {
	if l.iso == nil {
		return ""
	}
	var ld workspace.Landing
	var err error
	if out.Reason == engine.Completed {
		ld, err = l.iso.m.Land(context.WithoutCancel(ctx))
	} else {
		ld, err = l.iso.m.Leave(context.WithoutCancel(ctx), "the loop did not complete ("+string(out.Reason)+")")
	}
	if err != nil {
		l.c.Event(journal.Event{Type: journal.Landing, OK: journal.Bool(false), Reason: err.Error()})
		return "the merged work could not be landed: " + err.Error()
	}
	l.c.Event(journal.Event{Type: journal.Landing, OK: journal.Bool(true), Reason: ld.Message})
	return ld.Message
}

// adoptMerges resolves the atoms whose merge an ended run made but did not
// record: the last the journal says of the atom is a merge's intent (or its
// merge, without the finish), and the integration branch holds a commit
// carrying that attempt's trailers. Their work is taken as it is, never
// merged again. It returns how many it adopted.
func (l *localHost) adoptMerges(ctx context.Context) int {
	s := l.s
	if l.iso == nil {
		return 0
	}
	merged, err := l.iso.m.Merged(ctx)
	if err != nil {
		l.say("could not list the merges of the previous run: %v", err)
		return 0
	}
	open := false
	for _, mg := range merged {
		if a := s.Atom(mg.Atom); a != nil && a.Status != state.StatusResolved {
			open = true
		}
	}
	if !open {
		return 0
	}
	events, err := journal.Read(journal.PathFor(l.opts.StateFile))
	if err != nil {
		l.say("could not read the journal for the previous run's merges: %v", err)
		return 0
	}
	last := map[string]journal.Event{}
	recorded := map[string]bool{} // merge commits the journal already has
	for _, ev := range events {
		if c := journal.DataOf[journal.MergeData](ev).Commit; ev.Type == journal.Merge && c != "" {
			recorded[c] = true
		}
		switch {
		case ev.IsMergeIntent(),
			ev.Type == journal.Merge,
			ev.Type == journal.AtomReset,
			ev.Type == journal.AtomFinish && ev.Role == string(agent.Worker):
			last[ev.Atom] = ev
		}
	}
	n := 0
	for _, mg := range merged {
		a := s.Atom(mg.Atom)
		ev, ok := last[mg.Atom]
		if a == nil || a.Status == state.StatusResolved || !ok {
			continue
		}
		intent, merge := journal.DataOf[journal.WorktreeData](ev), journal.DataOf[journal.MergeData](ev)
		// Attempt numbers restart with each run: a merge the journal
		// recorded belongs to an earlier attempt, never to this intent.
		pending := ev.Type == journal.Worktree && intent.Number == mg.Number && !recorded[mg.Commit] ||
			ev.Type == journal.Merge && ev.OK != nil && *ev.OK && merge.Commit == mg.Commit
		if !pending {
			continue
		}
		summary := intent.Summary
		a.Status = state.StatusResolved
		bound := summary
		if strings.TrimSpace(bound) == "" {
			bound = "resolved by the worker"
		}
		_ = dag.Bind(s, a.ID, bound, mg.Changed)
		l.event(journal.Event{Atom: a.ID, Role: string(agent.Worker), Attempt: ev.Attempt, OK: journal.Bool(true),
			Reason: "adopted: its merge was already on " + l.iso.m.Branch() + " when the previous run ended; not merged again",
		}.With(journal.AtomFinishData{Summary: summary, Artifacts: mg.Changed, Commit: mg.Commit}))
		l.say("%s: adopted its merge %.12s, made before the previous run ended", a.ID, mg.Commit)
		last[mg.Atom] = journal.Event{} // one adoption per atom
		n++
	}
	if n > 0 {
		dag.ResolveParents(s)
	}
	return n
}
