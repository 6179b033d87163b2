package cli

import "github.com/aot-loop/aot/internal/control"

// workflowDoc is what aot status --json says of a loop's Temporal
// workflow, as the workflow answered before the status was gathered.
type workflowDoc = control.Workflow

type workflowAttemptDoc = control.WorkflowAttempt
