package engine

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// What the agent did is what counts. A worker that says it succeeded is
// not believed on its word: its attempt must have changed a file, and one
// of the files it claims, unless its atom declares expect_changes: false.
// With a worktree per attempt, the attempt's merge says what changed. In
// the project root with one worker at a time (isolation none, or auto
// outside a git repository) the engine stats every file under the root
// before and after the attempt (.git folders and the loop's own files left
// out) and takes a file whose size, time or mode moved, or that appeared or
// disappeared, as changed. With isolation shared workers run at once in
// one folder and a change cannot be told to be one worker's: the worker's
// word is taken there (shared is for agents that write nothing or for
// programs embedding the engine).
//
// A tool the agent's CLI refused is journaled (permission_denied, with the
// tool and what it was called on) as soon as the backend sees it, and a
// worker that changed nothing after a refusal fails with that kind rather
// than no_change: the refusal is why.

// ExpectsChanges reports whether a worker on the atom must change a file
// (its expect_changes is not false).
func ExpectsChanges(a *state.Atom) bool { return expectsChanges(a) }

// ClaimsUnchanged reports whether a worker named files and its attempt
// changed none of them: changed are the files it changed, claimed its
// claims, both relative to one folder. Such an attempt is no_change and
// is not merged (drivers other than the local one ask before merging).
func ClaimsUnchanged(changed, claimed []string) bool {
	return len(claimed) > 0 && !slices.ContainsFunc(claimed, func(c string) bool { return covered(c, changed) })
}

// ClaimsIn makes an agent's claims relative to its folder dir.
func ClaimsIn(dir string, claimed []string) []string { return claimsIn(dir, claimed) }

// expectsChanges reports whether a worker on the atom must change a file.
func expectsChanges(a *state.Atom) bool {
	return a == nil || a.ExpectChanges == nil || *a.ExpectChanges
}

// noChange checks a successful worker attempt against what it changed:
// changed are the files its attempt changed (relative to the project
// root), claimed the files it named. It returns the attempt's failure, or
// nil when the work is there.
func noChange(a *state.Atom, changed, claimed []string, denials []agent.Denial) error {
	if !expectsChanges(a) {
		return nil
	}
	var why string
	switch {
	case len(changed) == 0 && len(claimed) > 0:
		why = fmt.Sprintf("the worker said it succeeded and claimed %s, but its attempt changed no file", strings.Join(claimed, ", "))
	case len(changed) == 0:
		why = "the worker said it succeeded, but its attempt changed no file (an atom whose work changes nothing declares expect_changes: false)"
	case len(claimed) > 0 && !slices.ContainsFunc(claimed, func(c string) bool { return covered(c, changed) }):
		why = fmt.Sprintf("the worker claimed %s, but its attempt changed none of them (it changed %s)", strings.Join(claimed, ", "), dag.OneLine(strings.Join(changed, ", "), 200))
	default:
		return nil
	}
	if len(denials) > 0 {
		names := make([]string, len(denials))
		for i, d := range denials {
			names[i] = d.String()
		}
		return &agent.AttemptError{Kind: agent.KindPermission, Reason: "permission denied: its CLI refused " + dag.OneLine(strings.Join(names, "; "), 300) + "; " + why}
	}
	return &agent.AttemptError{Kind: agent.KindNoChange, Reason: "no change: " + why}
}

// covered reports whether the claim c (a file or a folder) covers one of
// the changed files.
func covered(c string, changed []string) bool {
	c = path.Clean(strings.TrimPrefix(filepath.ToSlash(c), "./"))
	return slices.ContainsFunc(changed, func(f string) bool { return c == "." || f == c || strings.HasPrefix(f, c+"/") })
}

// claimsIn makes the agent's claims relative to dir (absolute ones under
// it), slash-separated.
func claimsIn(dir string, claimed []string) []string {
	var out []string
	for _, c := range claimed {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if filepath.IsAbs(c) {
			if r, err := filepath.Rel(dir, c); err == nil && !strings.HasPrefix(r, "..") {
				c = r
			}
		}
		out = append(out, path.Clean(filepath.ToSlash(c)))
	}
	return out
}

// NoChangeBeforeMerge is noChange for an attempt about to be merged, on its
// own goroutine: expect is the atom's expect_changes, changed the files its
// commit changed, claimed its claims relative to its folder.
func NoChangeBeforeMerge(expect bool, changed, claimed []string, streamed, answered []agent.Denial) error {
	if !expect {
		return nil
	}
	return noChange(nil, changed, claimed, joinDenials(slices.Clone(streamed), answered))
}

// journalRefusals records a finished attempt's refusals, one
// permission_denied event each, and returns them.
func (e *engine) journalRefusals(t *task, r taskResult) []agent.Denial {
	for _, detail := range r.retried {
		e.event(journal.Event{Type: journal.ModelRetry, Atom: t.atom, Role: string(t.role), Attempt: t.attempt, Reason: dag.OneLine(detail, 300)})
	}
	list := joinDenials(r.refused, r.res.Denials)
	for _, d := range list {
		e.event(journal.Event{Atom: t.atom, Role: string(t.role), Attempt: t.attempt, Reason: dag.OneLine(refusedLine(d), 300)}.
			With(journal.PermissionDeniedData{Tool: d.Tool, Path: d.Path, Why: d.Why}))
	}
	return list
}

// joinDenials adds to seen (the refusals streamed while the agent ran) the
// ones its answer reported that are not already there.
func joinDenials(seen, answered []agent.Denial) []agent.Denial {
	for _, d := range answered {
		if !slices.Contains(seen, d) {
			seen = append(seen, d)
		}
	}
	return seen
}

// refusedLine is a refusal for people: "Write ../out.txt refused: ...".
func refusedLine(d agent.Denial) string {
	s := d.String() + " refused"
	if d.Why != "" {
		s += ": " + d.Why
	}
	return s
}

// checkWork turns a successful worker attempt that changed nothing into a
// failed one (see noChange). It runs after the merge, if any.
func (e *engine) checkWork(t *task, r *taskResult, claimed []string, denials []agent.Denial) {
	if r.err != nil || t.role != agent.Worker || !r.res.OK(agent.Worker) {
		return
	}
	var changed []string
	switch {
	case r.iso != nil && r.iso.merge != nil:
		changed = r.iso.merge.Changed
	case r.touched != nil:
		changed = *r.touched
	default:
		return // not measured: the worker's word is all there is
	}
	if err := noChange(e.ix.Atom(t.atom), changed, claimsIn(e.readDirFor(r), claimed), denials); err != nil {
		var ae *agent.AttemptError
		if a, ok := err.(*agent.AttemptError); ok {
			ae = a
			ae.Usage = r.res.Usage
		}
		r.err = ae
	}
}

// readDirFor is the folder an attempt's claims are relative to.
func (e *engine) readDirFor(r *taskResult) string {
	if r.iso != nil && r.iso.attempt.Dir != "" {
		return r.iso.attempt.Dir
	}
	return e.opts.Workdir
}
