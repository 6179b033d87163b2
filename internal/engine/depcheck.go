package engine

import (
	"context"
	"slices"

	"github.com/aot-loop/aot/internal/state"
)

// brokenDependencies runs the base case's checks (commands and files, no
// judge) after a worker reported failure on a, whose dependencies are all
// resolved, and reopens the dependencies whose checks fail: a later atom
// may have broken their work, and retrying a against it wastes attempts
// until the loop stalls. The checks run once per change of the work (gen),
// so a run of failures without any new result costs one check. It returns
// how many dependencies were reopened.
func (e *engine) brokenDependencies(ctx context.Context, a *state.Atom) int {
	if len(a.DependsOn) == 0 || e.book.DepGen == e.book.Gen {
		return 0
	}
	for _, d := range a.DependsOn {
		if da := e.ix.Atom(d); da == nil || da.Status != state.StatusResolved {
			return 0 // a dependency is not done: nothing to suspect
		}
	}
	e.book.DepGen = e.book.Gen
	passed, failures, err := e.verify(ctx, false)
	if err != nil || passed || e.stop != nil {
		return 0
	}
	n := e.reopenWhere(failures, func(id string) bool { return slices.Contains(a.DependsOn, id) })
	if n > 0 {
		e.say("%s failed with %d of its dependencies broken: they are redone first", a.ID, n)
	}
	return n
}
