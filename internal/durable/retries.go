package durable

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// Temporal retries an activity that failed for the infrastructure (a
// worker died, the remote refused a push) without the workflow knowing:
// the client sees it in the workflow's pending activities (their attempt
// past the first, the last failure, the last worker) and journals each
// retry once as an attempt_retry event. The file temporal.retries beside
// the journal keeps the retries journaled (run, activity id, try), so a
// client that restarts, or a second client, journals none twice.

func retriesPath(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "temporal.retries")
}

// heartbeatWhat reads what an attempt activity says in its heartbeats
// (Attempt's: "atom A attempt 2 (worker)").
var heartbeatWhat = regexp.MustCompile(`^atom (.+) attempt (\d+) \(([a-z_]+)\)$`)

// attemptID reads an attempt activity's id (activity_ids.go:
// attempt/<atom>/<n> for a worker, <role>/<atom>/<n> for a probe, a
// ".k" after when the run gave the name before): what a retry names when
// the try before it ended ahead of its first heartbeat.
var attemptID = regexp.MustCompile(`^([a-z_]+)/(.+)/(\d+)(?:\.\d+)?$`)

// JournalRetries appends to stateFile's journal an attempt_retry event
// for each retry of the workflow's activities under way that it does not
// have yet, and returns them.
func JournalRetries(ctx context.Context, c client.Client, m Marker, stateFile string) ([]journal.Event, error) {
	d, err := c.DescribeWorkflowExecution(ctx, m.WorkflowID, "")
	if err != nil {
		return nil, err
	}
	run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	type retry struct {
		key string
		ev  journal.Event
	}
	var found []retry
	for _, p := range d.GetPendingActivities() {
		if p.GetAttempt() <= 1 {
			continue
		}
		found = append(found, retry{key: fmt.Sprintf("%s %s %d", run, p.GetActivityId(), p.GetAttempt()), ev: retryEvent(p)})
	}
	if len(found) == 0 {
		return nil, nil
	}
	var added []journal.Event
	// Under the state file's lock: the journal has one writer at a time
	// (Project's appends take the same lock); the state is not changed.
	_, err = state.NewStore(stateFile).UpdateBatch(func(*state.State) error {
		seen := map[string]bool{}
		if f, err := os.Open(retriesPath(stateFile)); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				seen[sc.Text()] = true
			}
			_ = f.Close()
		}
		var keys []string
		for _, r := range found {
			if !seen[r.key] {
				keys, added = append(keys, r.key), append(added, r.ev)
			}
		}
		if len(added) == 0 {
			return nil
		}
		if err := appendJournal(stateFile, added); err != nil {
			return err
		}
		f, err := os.OpenFile(retriesPath(stateFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, journal.FileMode)
		if err != nil {
			return err
		}
		_, err = f.WriteString(strings.Join(keys, "\n") + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// retryEvent is the attempt_retry event of a pending activity past its
// first try: the atom, role and attempt its heartbeats name (an
// attempt's), the last failure as the reason, and the worker it failed on
// (while the retry waits; once it runs, the worker running it).
func retryEvent(p *workflowpb.PendingActivityInfo) journal.Event {
	failure := "unknown"
	if f := p.GetLastFailure(); f != nil {
		failure = f.GetMessage()
		if t := f.GetTimeoutFailureInfo(); t != nil && failure == "" {
			failure = strings.ToLower(strings.TrimPrefix(t.GetTimeoutType().String(), "TIMEOUT_TYPE_")) + " timeout"
		}
		if c := f.GetCause(); c != nil && c.GetMessage() != "" {
			failure += ": " + c.GetMessage()
		}
	}
	ev := journal.Event{Time: time.Now(), Reason: dag.OneLine(failure, 400)}
	d := journal.AttemptRetryData{Activity: p.GetActivityType().GetName(), ActivityID: p.GetActivityId(), Try: p.GetAttempt(),
		Worker: p.GetLastWorkerIdentity(), Failure: failure}
	if p.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
		d.RunningOn, d.Worker = d.Worker, "" // the retry's worker
	}
	var what string
	if hb := p.GetHeartbeatDetails(); hb != nil && DataConverter().FromPayloads(hb, &what) == nil {
		if m := heartbeatWhat.FindStringSubmatch(what); m != nil {
			ev.Atom, ev.Role = m[1], m[3]
			ev.Attempt, _ = strconv.Atoi(m[2])
		} else {
			d.Doing = what
		}
	} else if m := attemptID.FindStringSubmatch(p.GetActivityId()); m != nil && p.GetActivityType().GetName() == AttemptActivity {
		ev.Atom, ev.Role = m[2], m[1]
		if ev.Role == "attempt" {
			ev.Role = string(agent.Worker)
		}
		ev.Attempt, _ = strconv.Atoi(m[3])
	}
	return ev.With(d)
}

// appendJournal appends evs to stateFile's journal, synced; the caller
// holds the state file's lock.
func appendJournal(stateFile string, evs []journal.Event) error {
	jr, err := journal.Open(journal.PathFor(stateFile))
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if err := jr.Append(ev); err != nil {
			_ = jr.Close()
			return err
		}
	}
	return jr.Close()
}
