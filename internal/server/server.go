// Package server is aot serve: the loops of one or more workspaces behind a
// REST/SSE API on a loopback address, their CCW views kept in step, and the
// web dashboard. It holds no rule of the loop: every change goes through
// the engine's controls and the state store, as the CLI's do.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/server/web"
)

// Options configure a Server.
type Options struct {
	Workspaces   []string      // folders whose loops are served; at least one
	Token        string        // the access token (LoadToken)
	Exe          string        // the aot binary that runs loops; default: this program
	Poll         time.Duration // how often journals and state files are looked at; default 25ms
	ViewInterval time.Duration // how often changed CCW views are written; default 500ms
	Logger       *slog.Logger  // the server's own log; default: discarded
	Now          func() time.Time
	// Temporal reaches the workflows of loops that run on Temporal (see
	// TemporalLoops); nil: those loops are served from their files alone.
	Temporal      TemporalLoops
	TemporalEvery time.Duration // how often those workflows are asked; default 2s
	// What a client may take: a request's headers must arrive within
	// HeaderTimeout (default 10s) and its body within BodyTimeout after them
	// (default 30s); an answer must be taken within WriteTimeout (default
	// 2m; a stream: each of its writes within StreamWriteTimeout, default
	// 30s); a keep-alive connection idle for IdleTimeout (default 60s) is
	// closed.
	HeaderTimeout, BodyTimeout, WriteTimeout, StreamWriteTimeout, IdleTimeout time.Duration
}

// Server serves the loops.
type Server struct {
	opts   Options
	log    *slog.Logger
	reg    *registry
	hub    *hub
	addr   string // host:port it listens on
	addrMu sync.Mutex
	mux    *http.ServeMux
	http   *http.Server
	watch  context.CancelFunc
	done   chan struct{}

	closing   chan struct{} // closed by Shutdown: the streams end
	closeOnce sync.Once
}

// New opens the loops of the workspaces.
func New(opts Options) (*Server, error) {
	if len(opts.Workspaces) == 0 {
		return nil, errors.New("no workspace to serve")
	}
	if len(opts.Token) < 32 {
		return nil, errors.New("the access token is missing or too short")
	}
	if opts.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Exe = exe
	}
	if opts.Poll <= 0 {
		opts.Poll = 25 * time.Millisecond
	}
	if opts.ViewInterval <= 0 {
		opts.ViewInterval = 500 * time.Millisecond
	}
	if opts.TemporalEvery <= 0 {
		opts.TemporalEvery = 2 * time.Second
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&opts.HeaderTimeout, 10 * time.Second}, {&opts.BodyTimeout, 30 * time.Second}, {&opts.WriteTimeout, 2 * time.Minute},
		{&opts.StreamWriteTimeout, 30 * time.Second}, {&opts.IdleTimeout, time.Minute}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var wss, roots []string
	for _, ws := range opts.Workspaces {
		abs, err := filepath.Abs(ws)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("workspace %s: not a folder", ws)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("workspace %s: %w", ws, err)
		}
		wss, roots = append(wss, abs), append(roots, real)
	}
	s := &Server{opts: opts, log: opts.Logger, hub: newHub(), done: make(chan struct{}), closing: make(chan struct{})}
	s.reg = &registry{workspaces: wss, roots: roots, log: opts.Logger, hub: s.hub, now: opts.Now, loops: map[string]*loop{}}
	if err := s.reg.discover(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Serve answers on ln (a loopback address) until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return fmt.Errorf("refusing to serve on %s: aot serve listens on a loopback address only", ln.Addr())
	}
	s.addrMu.Lock()
	s.addr = tcp.String()
	s.addrMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	s.addrMu.Lock()
	s.watch = cancel
	s.addrMu.Unlock()
	// The views are brought up to date before the first request.
	for _, l := range s.reg.all() {
		s.pollLoop(l)
		s.syncView(l)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.watchLoops(ctx) }()
	go func() { defer wg.Done(); s.keepViews(ctx) }()
	go func() { defer wg.Done(); s.keepWorkflows(ctx) }()
	go func() { wg.Wait(); close(s.done) }()
	s.addrMu.Lock()
	// ReadTimeout bounds the headers and the body: net/http lifts it once
	// the body is read, so a longer answer (a stream, a stop that waits)
	// keeps its context.
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: s.opts.HeaderTimeout,
		ReadTimeout: s.opts.HeaderTimeout + s.opts.BodyTimeout, WriteTimeout: s.opts.WriteTimeout, IdleTimeout: s.opts.IdleTimeout}
	hs := s.http
	s.addrMu.Unlock()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops serving: the streams end at once, the other requests
// are waited for until ctx ends. The loops it started go on running.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.addrMu.Lock()
	stop, hs := s.watch, s.http
	s.addrMu.Unlock()
	if stop != nil {
		stop()
		select {
		case <-s.done:
		case <-ctx.Done():
		}
	}
	if hs == nil {
		return nil
	}
	return hs.Shutdown(ctx)
}

// Close ends every connection at once, for when Shutdown took too long.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.addrMu.Lock()
	hs := s.http
	s.addrMu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.Close()
}

// URL is the address to open, with the token.
func (s *Server) URL() string { return "http://" + s.Addr() + "/?token=" + s.opts.Token }

const cookieName = "aot_token"

// ServeHTTP checks Host and Origin for every request, then the token for
// the API, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.ownHost(r.Host) {
		writeError(w, http.StatusForbidden, "foreign Host %q refused: open the address aot serve printed", r.Host)
		return
	}
	origin := r.Header.Get("Origin")
	if origin != "" && !s.ownOrigin(origin) {
		writeError(w, http.StatusForbidden, "requests from origin %q are refused", origin)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/api/health" {
		how, ok := s.authorized(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "missing or wrong token: open the URL aot serve printed, or send Authorization: Bearer TOKEN")
			return
		}
		// A change made with the browser's cookie must come from our page.
		if how == "cookie" && r.Method != http.MethodGet && r.Method != http.MethodHead && origin == "" {
			writeError(w, http.StatusForbidden, "a change made with the dashboard's cookie needs the Origin header")
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) ownHost(host string) bool {
	addr := s.Addr()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
		if host == h+":"+port {
			return true
		}
	}
	return host == addr
}

func (s *Server) ownOrigin(origin string) bool {
	h, ok := strings.CutPrefix(origin, "http://")
	return ok && s.ownHost(h)
}

func (s *Server) authorized(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		t, ok := strings.CutPrefix(h, "Bearer ")
		return "bearer", ok && s.tokenOK(t)
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return "cookie", s.tokenOK(c.Value)
	}
	return "", false
}

func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.opts.Token)) == 1
}

// index serves the dashboard; /?token=T sets the cookie and drops the token
// from the address bar.
func (s *Server) index(static http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if t := r.URL.Query().Get("token"); t != "" {
			if !s.tokenOK(t) {
				writeError(w, http.StatusUnauthorized, "wrong token: open the URL aot serve printed")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		w.Header().Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	}
}

func (s *Server) staticFS() fs.FS { return web.FS }

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

type errorDoc struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, errorDoc{Error: fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Addr is the address it listens on, once Serve has started.
func (s *Server) Addr() string {
	s.addrMu.Lock()
	defer s.addrMu.Unlock()
	return s.addr
}

// LoopCount is how many loops are served.
func (s *Server) LoopCount() int { return len(s.reg.all()) }
