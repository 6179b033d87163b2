package engine

import (
	"context"
	"fmt"
	"strings"

	"path/filepath"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/verify"
)

// verify runs the base case itself; an agent's word is never proof. Judged
// checks go to the agent in the judge role, unless judges is false (then
// they count as not passed). A verification is reused while nothing changed
// since it ran.
func (e *engine) verify(ctx context.Context, judges bool) (bool, []string, error) {
	if e.book.VerifiedGen == e.book.Gen && judges {
		return false, e.book.VerifyFails, nil
	}
	e.say("verifying the base case")
	if err := e.host.Flush(); err != nil {
		return false, nil, err
	}
	rep, err := e.host.Checks(ctx, judges)
	if e.stop != nil || ctx.Err() != nil {
		if e.stop == nil {
			r := Interruption(ctx)
			e.stop = &r
		}
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("base case: %w", err)
	}
	failures := Failures(rep)
	e.event(journal.Event{OK: journal.Bool(rep.Passed)}.With(journal.VerifyData{Failures: failures, Checklist: rep.Checklist, Outputs: CheckOutputDir(e.opts.StateFile)}))
	if rep.Passed {
		e.say("base case passed")
	} else {
		e.say("base case failed: %s", dag.OneLine(strings.Join(failures, "; "), 100))
		if judges {
			e.book.VerifiedGen, e.book.VerifyFails = e.book.Gen, failures
		}
	}
	return rep.Passed, failures, nil
}

// Failures lists what a verification found failing, one line each:
// nested items under their group's name, judged checks nobody judged.
func Failures(rep verify.Report) []string {
	failures := collectFailures(rep.Checklist, "")
	for _, sk := range rep.Skipped {
		failures = append(failures, fmt.Sprintf("%s: not judged: %s", sk.Item, sk.Reason))
	}
	return failures
}

func collectFailures(items []verify.ItemResult, prefix string) []string {
	var out []string
	for _, it := range items {
		if it.Passed || it.NeedsJudge {
			continue
		}
		name := prefix + it.Item
		if len(it.GroupResults)+len(it.AnyOfResults) > 0 {
			sub := collectFailures(append(it.GroupResults, it.AnyOfResults...), name+" / ")
			if len(sub) > 0 {
				out = append(out, sub...)
				continue
			}
		}
		out = append(out, name+": "+dag.OneLine(it.Evidence, 300))
	}
	return out
}

// CheckOutputDir holds the last verification's output of each command check.
func CheckOutputDir(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "checks")
}

// CheckOutputFile is where the output of the check named item is kept.
func CheckOutputFile(stateFile, item string) string {
	return filepath.Join(CheckOutputDir(stateFile), history.SafeName(item)+".out")
}
