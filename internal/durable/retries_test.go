package durable

import (
	"fmt"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/aot-loop/aot/internal/journal"
)

// What Temporal says of an attempt retried after its worker stopped
// heartbeating becomes an attempt_retry event naming the atom, the role,
// the attempt, the worker and the failure.
func TestRetryEventNamesTheAttemptTheWorkerAndTheFailure(t *testing.T) {
	hb, err := DataConverter().ToPayloads("atom A/1 attempt 2 (worker)")
	if err != nil {
		t.Fatal(err)
	}
	p := &workflowpb.PendingActivityInfo{
		ActivityId: "7", ActivityType: &commonpb.ActivityType{Name: AttemptActivity}, Attempt: 2,
		State: enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, HeartbeatDetails: hb, LastWorkerIdentity: "123@box",
		LastFailure: &failurepb.Failure{FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: enumspb.TIMEOUT_TYPE_HEARTBEAT}}},
	}
	ev := retryEvent(p)
	if ev.Type != journal.AttemptRetry || ev.Atom != "A/1" || ev.Role != "worker" || ev.Attempt != 2 || ev.Reason != "heartbeat timeout" ||
		ev.Data["worker"] != "123@box" || ev.Data["try"] != int32(2) || ev.Data["activity_id"] != "7" {
		t.Errorf("the event of a heartbeat timeout: %+v", ev)
	}
	// A try that ended before its first heartbeat: the activity's id names
	// the atom, the role and the attempt.
	for id, want := range map[string][3]string{"attempt/A/1/2": {"A/1", "worker", "2"}, "probe/B/3.2": {"B", "probe", "3"}} {
		p := &workflowpb.PendingActivityInfo{ActivityId: id, ActivityType: &commonpb.ActivityType{Name: AttemptActivity}, Attempt: 2,
			State: enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, LastWorkerIdentity: "123@box"}
		if ev := retryEvent(p); ev.Atom != want[0] || ev.Role != want[1] || fmt.Sprint(ev.Attempt) != want[2] {
			t.Errorf("the retry of %s without heartbeats: atom %q role %q attempt %d", id, ev.Atom, ev.Role, ev.Attempt)
		}
	}
	// Once the retry runs, the worker Temporal names is the retry's; a
	// merge says what it was doing.
	hb, _ = DataConverter().ToPayloads("merge aot/loop/A-1")
	p.ActivityType.Name, p.HeartbeatDetails, p.State = MergeActivity, hb, enumspb.PENDING_ACTIVITY_STATE_STARTED
	p.LastFailure = &failurepb.Failure{Message: "push aot/loop/integration: refused", Cause: &failurepb.Failure{Message: "the remote is down"}}
	ev = retryEvent(p)
	if ev.Atom != "" || ev.Data["doing"] != "merge aot/loop/A-1" || ev.Data["running_on"] != "123@box" || ev.Data["worker"] != nil ||
		ev.Reason != "push aot/loop/integration: refused: the remote is down" {
		t.Errorf("the event of a merge's retry: %+v", ev)
	}
}
