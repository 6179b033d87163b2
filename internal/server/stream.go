package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

const keepAlive = 15 * time.Second

// stream sends events as Server-Sent Events: one loop's (ids are its journal
// sequence, so any point can be resumed from the journal) or every loop's
// (ids are the hub's sequence; the last ringSize can be resumed).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, l *loop) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	after := uint64(0)
	if last != "" {
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Last-Event-ID: not a sequence number")
			return
		}
		after = n
	}
	loopID := ""
	if l != nil {
		loopID = l.id
	}
	// A stream is exempt from the write timeout: each write has its own.
	rc := http.NewResponseController(w)
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(s.opts.StreamWriteTimeout)) }
	deadline()
	sub, replay, kept := s.hub.subscribe(loopID, after)
	defer s.hub.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 1000\n\n")

	sent := after // the last sequence sent on this stream
	if l != nil {
		// Everything after the client's id that was read so far; the live
		// messages below skip what this already sent.
		evs := l.snapshot()
		for i := int(after); i < len(evs); i++ {
			writeEvent(w, uint64(i+1), "journal", mustJSON(journalMsg{LoopID: l.id, Seq: i + 1, Event: evs[i]}))
		}
		sent = uint64(max(int(after), len(evs)))
	} else {
		if !kept {
			writeEvent(w, 0, "reset", mustJSON(map[string]string{"reason": "the events after this id are no longer kept: fetch the loops again"}))
		}
		for _, m := range replay {
			writeEvent(w, m.gid, m.kind, m.data)
			sent = m.gid
		}
	}
	fl.Flush()
	ka := time.NewTicker(keepAlive)
	defer ka.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		case <-ka.C:
			deadline()
			fmt.Fprintf(w, ": keep-alive\n\n")
		case m, open := <-sub.ch:
			if !open {
				return // too slow: the client reconnects with Last-Event-ID
			}
			deadline()
			id := m.gid
			if l != nil {
				id = uint64(m.seq)
			}
			if m.kind == "journal" {
				if id <= sent {
					continue
				}
				sent = id
			} else {
				id = 0
			}
			writeEvent(w, id, m.kind, m.data)
		}
		fl.Flush()
	}
}

func writeEvent(w http.ResponseWriter, id uint64, kind string, data []byte) {
	if id > 0 {
		fmt.Fprintf(w, "id: %d\n", id)
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, data)
}
