package durable

import (
	"time"

	"github.com/aot-loop/aot/internal/state"
)

// checksTime is how long the base case's checks may take at the run's
// check timeout (aot run --check-timeout), beyond the verification's
// usual bound; 0 without one, as before that flag reached the workers.
func (l *loop) checksTime() time.Duration {
	bc := l.core.State().Objective.BaseCase
	if l.in.CheckTimeout <= 0 || bc == nil {
		return 0
	}
	n := 0
	if bc.Legacy != nil {
		n++
	}
	var count func(items []state.ChecklistItem)
	count = func(items []state.ChecklistItem) {
		for _, it := range items {
			if it.Check != nil {
				n++
			}
			count(it.Group)
			count(it.AnyOf)
		}
	}
	count(bc.Checklist)
	return time.Duration(n) * l.in.CheckTimeout
}
