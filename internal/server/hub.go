package server

import (
	"sync"
)

// The hub fans the loops' events out to the SSE clients. Each event is
// encoded once. A client too slow to keep up is dropped: it reconnects with
// Last-Event-ID and gets what it missed, instead of holding back the others.

const (
	ringSize  = 4096 // events the all-loops stream can replay
	subBuffer = 1024 // events a client may lag behind before it is dropped
)

type message struct {
	gid  uint64 // the hub's sequence; 0 for messages without an id
	loop string
	seq  int    // the loop's sequence (journal events); 0 otherwise
	kind string // journal, state, notice
	data []byte
}

type subscriber struct {
	loop string // "" for every loop
	ch   chan message
}

type hub struct {
	mu   sync.Mutex
	next uint64
	ring []message // the last ringSize journal messages, oldest first
	subs map[*subscriber]struct{}
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

func (h *hub) publish(m message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m.kind == "journal" {
		h.next++
		m.gid = h.next
		if len(h.ring) == ringSize {
			copy(h.ring, h.ring[1:])
			h.ring = h.ring[:ringSize-1]
		}
		h.ring = append(h.ring, m)
	}
	for s := range h.subs {
		if s.loop != "" && s.loop != m.loop {
			continue
		}
		select {
		case s.ch <- m:
		default:
			close(s.ch)
			delete(h.subs, s)
		}
	}
}

// subscribe registers a client. For the all-loops stream, after > 0 asks
// for the journal messages after that id: replay holds them, and ok is false
// when they are no longer kept.
func (h *hub) subscribe(loop string, after uint64) (s *subscriber, replay []message, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s = &subscriber{loop: loop, ch: make(chan message, subBuffer)}
	h.subs[s] = struct{}{}
	ok = true
	if loop == "" && after > 0 && after != h.next {
		// Older than what is kept, or from before a restart of the server.
		if after > h.next || len(h.ring) == 0 || h.ring[0].gid > after+1 {
			ok = false
		} else {
			for _, m := range h.ring {
				if m.gid > after {
					replay = append(replay, m)
				}
			}
		}
	}
	return s, replay, ok
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
}

func (h *hub) clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
