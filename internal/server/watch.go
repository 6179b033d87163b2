package server

import (
	"context"
	"time"

	"github.com/aot-loop/aot/internal/journal"
)

// watch reads every loop's new journal lines and state changes, fans them
// out to the streams and keeps the CCW views in step, until ctx ends. One
// goroutine for all loops: a stat per loop per tick costs little, and it
// works on any file system.
func (s *Server) watchLoops(ctx context.Context) {
	tick := time.NewTicker(s.opts.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		for _, l := range s.reg.all() {
			s.pollLoop(l, now)
		}
	}
}

func (s *Server) pollLoop(l *loop, now time.Time) {
	evs, skipped, err := l.fol.Next()
	if err != nil {
		s.log.Warn("journal unreadable", "loop", l.id, "error", err)
	}
	for _, sk := range skipped {
		s.log.Warn("journal line skipped", "loop", l.id, "line", sk.Line, "error", sk.Err)
	}
	if len(evs) > 0 {
		l.mu.Lock()
		first := len(l.events) + 1
		// Appending never changes what earlier snapshots see.
		l.events = append(l.events[:len(l.events):len(l.events)], evs...)
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
	l.viewMu.Lock()
	defer l.viewMu.Unlock()
	l.mu.Lock()
	due := l.dirty && now.Sub(l.written) >= s.opts.ViewInterval
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
