package local

import (
	"slices"
	"sync"
)

// perTask collects, per task, what its agent's CLI said while it ran (the
// tool calls it refused, the model calls it retried), on the attempts'
// goroutines, until the attempt's end journals them.
type perTask[T any] struct {
	mu     sync.Mutex
	byTask map[int][]T
}

func (r *perTask[T]) add(task int, d T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byTask == nil {
		r.byTask = map[int][]T{}
	}
	r.byTask[task] = append(r.byTask[task], d)
}

// peek returns what a task's CLI said so far, keeping it.
func (r *perTask[T]) peek(task int) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byTask[task])
}

// take returns and forgets what a task's CLI said.
func (r *perTask[T]) take(task int) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.byTask[task]
	delete(r.byTask, task)
	return d
}
