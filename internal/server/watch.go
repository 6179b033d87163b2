package server

import (
	"context"
	"time"

	"github.com/aot-loop/aot/internal/journal"
)

// watchLoops reads every loop's new journal lines and state changes and
// fans them out to the streams, until ctx ends. One goroutine for all
// loops: a stat per loop per tick costs little, and it works on any file
// system. The CCW views are written by keepViews, so that their fsyncs never
// hold back an event on its way to the clients.
func (s *Server) watchLoops(ctx context.Context) {
	s.eachLoop(ctx, s.opts.Poll, s.pollLoop)
}

// keepViews writes the CCW view of every loop that changed, at most once
// per ViewInterval, and rebuilds one changed or removed behind its back.
func (s *Server) keepViews(ctx context.Context) {
	s.eachLoop(ctx, s.opts.ViewInterval, s.syncView)
}

// eachLoop calls fn for every loop once per interval until ctx ends.
func (s *Server) eachLoop(ctx context.Context, interval time.Duration, fn func(*loop)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, l := range s.reg.all() {
			fn(l)
		}
	}
}

func (s *Server) pollLoop(l *loop) {
	// A look at the files' sizes and times reads nothing; what changed is
	// read once the paths are checked. (A check resolves every link of
	// the paths: too dear for every loop at every tick.) A loop with
	// something wrong is looked at again at every tick, for a mend that
	// leaves the times as they were (a chmod); what is wrong is said once.
	st, js := stampOf(l.stateFile), stampOf(l.journal)
	l.mu.Lock()
	broken := l.reported["files"] != "" || l.reported["journal"] != "" || l.reported["state"] != ""
	if l.reported["state"] != "" {
		l.dirty = true // the view's writer reads the state again
	}
	same := !broken && st == l.stamp && js == l.journalStamp
	l.mu.Unlock()
	if same {
		return
	}
	sf, err := l.checked()
	s.report(l, "files", err)
	if err != nil {
		return // nothing of it is read
	}
	evs, skipped, err := l.fol.Next()
	s.report(l, "journal", err)
	if err == nil {
		l.mu.Lock()
		l.journalStamp = js
		l.mu.Unlock()
	}
	for _, sk := range skipped {
		s.log.Warn("journal line skipped", "loop", l.id, "line", sk.Line, "error", sk.Err)
	}
	if l.fol.Replaced() {
		// A new journal (the workspace started over): nothing of the old
		// one stays in the view; evs are the new one's, from its start.
		l.mu.Lock()
		l.events, l.outputsSeq, l.sum, l.dirty = nil, -1, nil, true
		l.mu.Unlock()
	}
	if len(evs) > 0 {
		l.mu.Lock()
		first := len(l.events) + 1
		// Snapshots are capped at their length: appending never changes
		// what they see.
		l.events = append(l.events, evs...)
		l.dirty = true
		l.mu.Unlock()
		for i, ev := range evs {
			seq := first + i
			s.hub.publish(message{loop: l.id, seq: seq, kind: "journal", data: mustJSON(journalMsg{LoopID: l.id, Seq: seq, Event: ev})})
		}
	}
	if st := stampOf(sf); st != l.stamp {
		l.mu.Lock()
		l.stamp = st
		l.dirty = true
		l.mu.Unlock()
		if len(evs) == 0 {
			s.stateChanged(l)
		}
	}
}

// syncView writes the loop's view if it is behind, or if someone changed
// or removed it. A view that cannot be written is tried again when the
// loop changes, not at every tick.
func (s *Server) syncView(l *loop) {
	l.viewMu.Lock()
	defer l.viewMu.Unlock()
	l.mu.Lock()
	due := l.dirty
	lost := l.viewStamp.ok && stampOf(viewPath(l)) != l.viewStamp
	l.dirty = false
	l.mu.Unlock()
	if !due && !lost {
		return
	}
	if _, err := l.checked(); err != nil {
		return // pollLoop says why
	}
	if lost {
		s.reg.notice(l, viewPath(l)+" was changed or removed behind the server: rebuilt from the state, the progress files and the journal")
	}
	v, err := s.buildView(l)
	s.report(l, "state", err)
	if err == nil {
		s.report(l, "view", s.putView(l, v))
	}
}

// report says what is wrong with one source of l's files ("files",
// "journal", "state", "view") in the log and on the streams, once: again only when
// what is wrong changes, and once more when it is right again. A loop
// broken for hours costs one line, not one per tick.
func (s *Server) report(l *loop, source string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	l.mu.Lock()
	was := l.reported[source]
	l.reported[source] = msg
	l.mu.Unlock()
	switch {
	case msg == was:
	case msg == "":
		s.log.Info("the loop's files are in order again", "loop", l.id, "what", source)
		s.stateChanged(l)
	default:
		s.reg.notice(l, reportText[source]+msg)
	}
}

var reportText = map[string]string{
	"files":   "the loop is not read (said once, until it changes): ",
	"journal": "the loop's journal cannot be read (said once, until it changes): ",
	"state":   "the loop is shown as failed (said once, until it changes): ",
	"view":    "the loop's CCW view is not written (said once, until it changes): ",
}

type journalMsg struct {
	LoopID string        `json:"loop_id"`
	Seq    int           `json:"seq"`
	Event  journal.Event `json:"event"`
}
