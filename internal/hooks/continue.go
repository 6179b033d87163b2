package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// listed bounds the atoms and checks a message names.
const listed = 10

// errNoChange aborts an update that has nothing to write; errVerify one
// that must wait for the base case.
var (
	errNoChange = errors.New("no change")
	errVerify   = errors.New("the base case must run first")
)

// decideContinue answers a continuation hook: the decision order of the
// original stop hook (seed-plugin-behaviour.md 4.2), with its defects fixed.
func decideContinue(ctx context.Context, o *Options, in Input) (Decision, error) {
	// Only the aot coordinator subagent iterates: any other subagent of the
	// session (a worker the session started for an atom) may finish, and
	// the session's own Stop does the bookkeeping once.
	if o.Event == SubagentStop && roleOf(in.AgentType) != roleCoordinator {
		return Decision{}, nil
	}
	l, err := gate(o, in)
	if err != nil || l == nil {
		return Decision{}, err
	}
	if o.Event != SubagentStop {
		_ = journalSessionUsage(l.path, in) // best effort: the decision does not wait on it
	}
	// One locked read-validate-update decides; when no atom is left it stops
	// short, the base case runs outside the lock (it may take minutes), and
	// a second update decides with the verdict, which counts only if no atom
	// is left then either. A file that does not validate is refused before
	// fn runs. stop_hook_active (a hook already kept this session going, and
	// Claude Code 2.1.330 keeps the flag set for every later stop until the
	// person's next prompt) keeps the session going again only for progress:
	// no state of the file can wedge it (D6), yet a loop of several atoms
	// still runs to its end.
	store := state.NewStore(l.path).RefuseInvalid()
	var d Decision
	var verdict *verify.Report
	var bc *state.BaseCase
	fn := func(s *state.State) error {
		if s.Control.Status != state.ControlRunning || s.Control.RedirectRequested {
			// A redirect in progress: the person is changing the loop; let
			// the session stop and leave the file as it is.
			return errNoChange
		}
		u := dag.Unresolved(s)
		if verdict == nil && !s.Control.StopRequested && u == 0 {
			bc = s.Objective.BaseCase
			return errVerify
		}
		prev := s.Control.PrevPendingCount
		progress := prev >= 0 && u < prev
		d = step(s, u, verdict)
		if d.Action == None || in.StopHookActive && d.Action == Block && !progress {
			d = Decision{}
			return errNoChange
		}
		return nil
	}
	_, err = store.UpdateControl(fn)
	if errors.Is(err, errVerify) {
		rep, verr, cerr := o.check(ctx, bc, l.root)
		if cerr != nil {
			return Decision{}, cerr
		}
		if verr != nil {
			rep = verify.Report{Checklist: []verify.ItemResult{{Item: "base_case", Evidence: verr.Error()}}}
		}
		verdict = &rep
		_, err = store.UpdateControl(fn)
	}
	if errors.Is(err, errNoChange) {
		return Decision{}, nil
	}
	if err != nil {
		return Decision{}, err
	}
	if d.Action == End {
		// The loop has ended: its next start may be claimed afresh.
		return d, ReleaseOwner(l.path)
	}
	return d, nil
}

// check runs the base case under the hook's guard: verr is the check's
// own failure (a verdict), err means no verdict at all (the guard did not
// start, or the hook was told to end while the check ran).
func (o *Options) check(ctx context.Context, bc *state.BaseCase, dir string) (rep verify.Report, verr, err error) {
	if o.Guard != nil {
		done, err := o.Guard()
		if err != nil {
			return rep, nil, err
		}
		defer done()
	}
	rep, verr = o.verify(ctx, bc, dir)
	if ctx.Err() != nil {
		return rep, nil, fmt.Errorf("the base case check was interrupted (%w): the loop is left as it was", context.Cause(ctx))
	}
	return rep, verr, nil
}

func (o *Options) verify(ctx context.Context, bc *state.BaseCase, dir string) (verify.Report, error) {
	if o.Verify != nil {
		return o.Verify(ctx, bc, dir)
	}
	return verify.BaseCase(ctx, bc, verify.Options{Dir: dir})
}

// step is one continuation on the state read under the lock, of which u
// atoms are unresolved: it changes s's control fields (and nothing else:
// the store then rewrites only them) and says what the session should do.
func step(s *state.State, u int, verdict *verify.Report) Decision {
	c := &s.Control
	lim := s.Objective.Constraints
	if c.Status != state.ControlRunning || c.RedirectRequested {
		return Decision{}
	}
	if c.StopRequested {
		reason := "manual stop requested"
		if c.StopReason != nil && strings.TrimSpace(*c.StopReason) != "" {
			reason = *c.StopReason
		}
		c.Status, c.StopReason = state.ControlStopped, &reason
		return Decision{Action: End, Message: "AoT Loop stopped: " + reason + ". Resume with /enter-recursion (or aot run)."}
	}
	if u == 0 && verdict != nil && verdict.Passed {
		reason := "completed: the base case passed (checked by aot)"
		c.Status, c.StopReason = state.ControlCompleted, &reason
		c.StallCount, c.PrevPendingCount = 0, 0
		return Decision{Action: End, Message: fmt.Sprintf("AoT Loop completed: every atom is resolved and the base case passed (%d checks, run by aot).", len(verdict.Checklist))}
	}
	c.Iteration++
	switch {
	case c.PrevPendingCount < 0 || u < c.PrevPendingCount:
		c.StallCount = 0
	default:
		c.StallCount++
	}
	prev := c.PrevPendingCount
	c.PrevPendingCount = u
	stop := func(reason, advice string) Decision {
		c.Status, c.StopReason = state.ControlStopped, &reason
		return Decision{Action: End, Message: "AoT Loop stopped: " + reason + ". " + advice}
	}
	switch {
	case lim.MaxIterations > 0 && c.Iteration >= lim.MaxIterations:
		return stop(fmt.Sprintf("max_iterations: %d of %d iterations done (%s unresolved)", c.Iteration, lim.MaxIterations, brief.Count(u, "atom")),
			"Raise the bound with aot redirect --reason R --max-iterations N, then /enter-recursion.")
	case lim.MaxStallCount > 0 && c.StallCount >= lim.MaxStallCount:
		return stop(fmt.Sprintf("stall: %d stops in a row without progress (%s unresolved)", c.StallCount, brief.Count(u, "atom")),
			"Change the plan (aot atom decompose, aot or switch, aot redirect), then /enter-recursion.")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "AoT Loop iteration %d", c.Iteration)
	if lim.MaxIterations > 0 {
		fmt.Fprintf(&b, " of %d", lim.MaxIterations)
	}
	fmt.Fprintf(&b, ": %s unresolved. Do not stop yet.\n", brief.Count(u, "atom"))
	if c.StallCount > 0 {
		fmt.Fprintf(&b, "\nNo progress since the last stop (%d unresolved then, %d now; stall %d of %d). Break the stall: split an atom that is too big (aot atom decompose ID --child ID=DESC ... --reason R), switch an OR choice (aot or switch GROUP CHOICE --reason R), or change the approach.\n",
			prev, u, c.StallCount, lim.MaxStallCount)
	}
	switch {
	case u == 0 && verdict != nil:
		b.WriteString("\nEvery atom is resolved, but the base case fails:\n")
		writeFailures(&b, verdict)
		b.WriteString("\nFix what fails, or add the missing work as atoms (aot atom add ID --description D), then stop again: aot runs the base case at every stop.\n")
	case u == 0:
		b.WriteString("\nEvery atom is resolved; aot will run the base case at the next stop.\n")
	default:
		writeNext(&b, s)
	}
	return Decision{Action: Block, Reason: b.String(),
		Message: fmt.Sprintf("aot: iteration %d, %d atoms unresolved, stall %d", c.Iteration, u, c.StallCount)}
}

// writeNext names the atoms to work on next, or why none can start.
func writeNext(b *strings.Builder, s *state.State) {
	exec := dag.Executable(s, 0)
	if len(exec) > 0 {
		b.WriteString("\nWork on these executable atoms next (mark each with aot atom set ID in_progress, then aot bind ID --summary S --artifacts a,b and aot atom set ID resolved when done):\n")
		for i, a := range exec {
			if i == listed {
				fmt.Fprintf(b, "- and %d more (aot state lists them)\n", len(exec)-listed)
				break
			}
			fmt.Fprintf(b, "- %s: %s\n", a.ID, dag.OneLine(a.Description, 200))
		}
		return
	}
	var running []string
	for i := range s.Atoms {
		if s.Atoms[i].Status == state.StatusInProgress {
			running = append(running, s.Atoms[i].ID)
		}
	}
	if len(running) > 0 {
		fmt.Fprintf(b, "\nNo atom can start: finish the atoms in progress (%s), binding and resolving each.\n", names(running))
		return
	}
	if waits := dag.Deadlock(s); len(waits) > 0 {
		b.WriteString("\nNo atom can ever start (deadlock):\n")
		for i, w := range waits {
			if i == listed {
				fmt.Fprintf(b, "- and %d more\n", len(waits)-listed)
				break
			}
			fmt.Fprintf(b, "- %s waits on %s\n", w.Atom, strings.Join(w.WaitsOn, ", "))
		}
		b.WriteString("Fix the graph (aot or switch, aot atom decompose, aot redirect).\n")
	}
}

// writeFailures names the checks of the base case that did not pass.
func writeFailures(b *strings.Builder, r *verify.Report) {
	n := 0
	for _, it := range r.Checklist {
		if it.Passed {
			continue
		}
		if n == listed {
			b.WriteString("- and more (aot verify lists every check)\n")
			return
		}
		n++
		fmt.Fprintf(b, "- %s: %s\n", it.Item, dag.OneLine(it.Evidence, 300))
	}
	for _, sk := range r.Skipped {
		if n == listed {
			b.WriteString("- and more (aot verify lists every check)\n")
			return
		}
		n++
		fmt.Fprintf(b, "- %s (%s): not decided, %s; a judged check needs the delegated loop (aot run) or a person\n", sk.Item, sk.Type, sk.Reason)
	}
}

func names(ids []string) string {
	if len(ids) > listed {
		return strings.Join(ids[:listed], ", ") + fmt.Sprintf(" and %d more", len(ids)-listed)
	}
	return strings.Join(ids, ", ")
}
