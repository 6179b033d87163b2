package cli

import (
	"fmt"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/hooks"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// An in-session loop has no engine to journal what happens: the session
// itself does the work, through aot's commands. Those commands journal it
// when the session that runs them owns the loop, so that aot status, aot
// logs and the dashboard show an in-session loop as they show any other:
// its start with the session as the agent of every role, and each atom the
// session takes up and finishes as an attempt.

// sessionAgent names an owning session as an agent.
func sessionAgent(o *hooks.Owner) string {
	return fmt.Sprintf("%s session %s (in-session)", o.Client, o.SessionID)
}

// journalSession appends evs to the loop's journal, durably.
func journalSession(stateFile string, evs ...journal.Event) error {
	j, err := journal.Open(journal.PathFor(stateFile))
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if err := j.Append(ev); err != nil {
			_ = j.Close()
			return err
		}
	}
	return j.Close()
}

// sessionStarted journals the start of a loop an owning session drives.
func sessionStarted(stateFile string, o *hooks.Owner, now time.Time) error {
	agents := map[string]string{}
	for _, r := range agent.Roles {
		if r != agent.Align {
			agents[string(r)] = sessionAgent(o)
		}
	}
	return journalSession(stateFile, journal.Event{Time: now, Reason: "started in " + string(o.Client) + " session " + o.SessionID}.
		With(journal.RunStartData{Agents: agents, Session: &journal.Session{Client: string(o.Client), ID: o.SessionID}}))
}

// sessionAtom journals an owning session's change of an atom's status: an
// atom taken up is an attempt's start; one resolved, or set back to
// pending, is that attempt's end.
func sessionAtom(stateFile string, o *hooks.Owner, id, from, to string, now time.Time) error {
	if from == to {
		return nil
	}
	evs, err := journal.Read(journal.PathFor(stateFile))
	if err != nil {
		evs = nil // a missing or unreadable journal: numbering starts again
	}
	n, started := 0, time.Time{}
	for _, ev := range evs {
		if ev.Type == journal.AtomStart && ev.Atom == id && ev.Role == string(agent.Worker) {
			n, started = max(n, ev.Attempt), ev.Time
		}
	}
	base := journal.Event{Time: now, Atom: id, Role: string(agent.Worker)}
	switch {
	case to == state.StatusInProgress:
		base = base.With(journal.AtomStartData{Agent: sessionAgent(o)})
		base.Attempt = n + 1
	case from == state.StatusInProgress && to == state.StatusResolved:
		base = base.With(journal.AtomFinishData{Agent: sessionAgent(o)})
		base.Attempt, base.OK = max(n, 1), journal.Bool(true)
		base.Reason = "resolved by the session"
	case from == state.StatusInProgress && to == state.StatusPending:
		base = base.With(journal.AtomFinishData{Agent: sessionAgent(o)})
		base.Attempt, base.OK = max(n, 1), journal.Bool(false)
		base.Reason = "set back to pending by the session"
	default:
		return nil
	}
	if base.Type == journal.AtomFinish && !started.IsZero() {
		base.DurationMS = now.Sub(started).Milliseconds()
	}
	return journalSession(stateFile, base)
}
