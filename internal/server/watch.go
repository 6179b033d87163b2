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
	evs, skipped, err := l.fol.Next()
	if err != nil {
		s.log.Warn("journal unreadable", "loop", l.id, "error", err)
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
	if st := stampOf(l.stateFile); st != l.stamp {
		l.mu.Lock()
		l.stamp = st
		l.dirty = true
		l.mu.Unlock()
		if len(evs) == 0 {
			s.hub.publish(message{loop: l.id, kind: "state", data: mustJSON(map[string]string{"loop_id": l.id})})
		}
	}
}

// syncView writes the loop's view if it is behind, or if someone changed
// or removed it.
func (s *Server) syncView(l *loop) {
	l.viewMu.Lock()
	defer l.viewMu.Unlock()
	l.mu.Lock()
	due := l.dirty
	lost := !l.written.IsZero() && stampOf(viewPath(l)) != l.viewStamp
	l.mu.Unlock()
	if lost {
		s.reg.notice(l, viewPath(l)+" was changed or removed behind the server: rebuilt from the state, the progress files and the journal")
	}
	if due || lost {
		if err := s.writeViewLocked(l); err != nil {
			s.log.Warn("CCW view not written", "loop", l.id, "error", err)
		}
	}
}

type journalMsg struct {
	LoopID string        `json:"loop_id"`
	Seq    int           `json:"seq"`
	Event  journal.Event `json:"event"`
}
