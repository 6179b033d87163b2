package cli

import (
	"time"

	"github.com/aot-loop/aot/internal/server"
)

// workflowDoc is what aot status --json says of a loop's Temporal
// workflow, as the workflow answered before the status was gathered. aot
// serve reads it from aot-temporal status (serve_temporal_exec.go).
type workflowDoc struct {
	ID      string `json:"workflow_id"`
	Running bool   `json:"running"` // it has not ended
	// Status is Temporal's word for it (Running, Completed, Canceled...).
	Status string `json:"status,omitempty"`
	// NoWorker says that no worker polls its task queue: the workflow
	// could not be asked, and waits.
	NoWorker bool `json:"no_worker,omitempty"`
	// TaskQueue is the queue its tasks wait on; Workers the identities of
	// the workers that poll it lately.
	TaskQueue string   `json:"task_queue,omitempty"`
	Workers   []string `json:"workers,omitempty"`
	Paused    bool     `json:"paused"`
	// PausedSince and PausedKill say when the pause in force began and
	// whether it killed the running attempts.
	PausedSince *time.Time           `json:"paused_since,omitempty"`
	PausedKill  bool                 `json:"paused_kill,omitempty"`
	Attempts    []workflowAttemptDoc `json:"attempts"` // in flight, on the workers
	Outcome     string               `json:"outcome,omitempty"`
}

type workflowAttemptDoc struct {
	Atom    string    `json:"atom"`
	Attempt int       `json:"attempt"`
	Started time.Time `json:"started"`
}

// forServer is the doc in the server's words.
func (d *workflowDoc) forServer() server.Workflow {
	wf := server.Workflow{ID: d.ID, Running: d.Running, Paused: d.Paused, PausedSince: d.PausedSince, PausedKill: d.PausedKill}
	for _, a := range d.Attempts {
		wf.Attempts = append(wf.Attempts, server.WorkflowAttempt{Atom: a.Atom, Attempt: a.Attempt, Started: a.Started})
	}
	return wf
}
