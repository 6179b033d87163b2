package durable

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
)

// Activity ids name what an activity does, so that Temporal's UI and CLI
// (temporal workflow show, the pending activities of describe) say which
// atom and which attempt: attempt/<atom>/<n> for a worker's attempt,
// <role>/<atom>/<n> for a probe's, merge/<atom>/<n>, verify/<k> and
// planner/<k> in the order of the workflow's run, clean for the last
// sweep of branches. Workflows started before ids were given replay
// without them (Temporal's own numbers).

const activityIDsChange = "activity-ids"

// activityIDs counts the names given in one run of the workflow: an id
// names one activity of the run, even if the Core runs the same atom's
// attempt number twice (a killed attempt given back).
type activityIDs map[string]int

// activityID returns name, made unique within the run, or "" for a
// workflow that began before ids were given.
func (l *loop) activityID(name string) string {
	if workflow.GetVersion(l.ctx, activityIDsChange, workflow.DefaultVersion, 1) < 1 {
		return ""
	}
	if l.named == nil {
		l.named = activityIDs{}
	}
	l.named[name]++
	if n := l.named[name]; n > 1 {
		return fmt.Sprintf("%s.%d", name, n)
	}
	return name
}

// counted returns kind/<k>, the kind's k-th activity in this run.
func (l *loop) counted(kind string) string {
	if kind == "" {
		kind = "agent"
	}
	if workflow.GetVersion(l.ctx, activityIDsChange, workflow.DefaultVersion, 1) < 1 {
		return ""
	}
	if l.named == nil {
		l.named = activityIDs{}
	}
	l.named[kind]++
	return fmt.Sprintf("%s/%d", kind, l.named[kind])
}

// attemptName names an attempt activity after its role, atom and number.
func attemptName(a engine.Attempt) string {
	if a.Role == agent.Worker || a.Role == "" {
		return fmt.Sprintf("attempt/%s/%d", a.Atom, a.N)
	}
	return fmt.Sprintf("%s/%s/%d", a.Role, a.Atom, a.N)
}

// named sets the activity id of o.
func named(o workflow.ActivityOptions, id string) workflow.ActivityOptions {
	o.ActivityID = id
	return o
}
