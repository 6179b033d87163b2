// Package fakellm is a scripted fake model server for running real coding
// agent CLIs (Claude Code, Codex, Gemini CLI) and our own code offline.
//
// It binds to 127.0.0.1 only and speaks Anthropic Messages, OpenAI
// Responses, OpenAI Chat Completions and Gemini generateContent, streaming
// and not. What it answers comes from a [Script]; which scripted reply a
// request gets is derived from the request alone (the conversation from the
// user text before the model's first reply, the turn from the number of
// model replies in the history), so the main agent, its subagents and any
// side requests are each routed by their own first prompt, in parallel if
// need be. The only state is a counter per error entry (see [Turn]).
//
// Requests nothing targets never hang: a request that matches no
// conversation gets the script's default reply, and one that demands JSON
// following a schema (Gemini's router classifier, its next-speaker check)
// gets a JSON object filled from that schema unless the script answers it
// with JSON itself.
package fakellm

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a Server.
type Options struct {
	// Port to listen on at 127.0.0.1; 0 picks a free one.
	Port int
	// LogPath, when set, gets one JSON line per request (appended).
	LogPath string
	// MaxRequests bounds a runaway client: past it every request gets a 500.
	// 0 means 10000.
	MaxRequests int
}

// Request is one logged request, as Server.Requests returns it and as the
// log file holds it (there with long texts cut short and no body).
type Request struct {
	Seq      int               `json:"n"`
	Time     time.Time         `json:"t"`
	Method   string            `json:"method"`
	Path     string            `json:"path"`
	Query    string            `json:"query,omitempty"`
	Header   map[string]string `json:"headers,omitempty"` // keys redacted
	Protocol string            `json:"protocol,omitempty"`
	BodyKeys []string          `json:"body_keys,omitempty"`
	Model    string            `json:"model,omitempty"`
	Stream   bool              `json:"stream,omitempty"`
	Tools    []string          `json:"tools,omitempty"`
	// Turn is the number of model replies already in the history.
	Turn int `json:"turn"`
	// Conversation is the index of the matched conversation, -1 for none.
	Conversation int `json:"conversation"`
	// Reply names what was answered: "conv1/turn0", "conv1/turn0/error",
	// "conv1/exhausted", "default", "schema", "count_tokens", "models",
	// "head", "not_found", "bad_request", "max_requests".
	Reply  string  `json:"reply"`
	Status int     `json:"status"`
	Blocks []Block `json:"reply_blocks,omitempty"`
	// DelayMS is how long the answer was held back.
	DelayMS   int    `json:"delay_ms,omitempty"`
	FirstUser string `json:"first_user,omitempty"`
	// Tail is what the client sent after the model's previous reply
	// (the prompt, or tool output).
	Tail   string `json:"tail,omitempty"`
	System string `json:"-"`
	Body   []byte `json:"-"`
}

// Server is a running fake model server.
type Server struct {
	script      Script
	maxRequests int
	ln          net.Listener
	http        *http.Server
	done        chan struct{} // closed by Close: ends delays
	handlers    sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	seq      int
	served   map[[2]int]int // error entry (conversation, turn entry) -> answers given
	requests []Request
	log      *os.File
}

// New starts a server for s on 127.0.0.1.
func New(s Script, opts Options) (*Server, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	srv := &Server{
		script:      s,
		maxRequests: opts.MaxRequests,
		done:        make(chan struct{}),
		served:      map[[2]int]int{},
	}
	if srv.maxRequests == 0 {
		srv.maxRequests = 10000
	}
	if opts.LogPath != "" {
		f, err := os.OpenFile(opts.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open request log: %w", err)
		}
		srv.log = f
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.Port)))
	if err != nil {
		if srv.log != nil {
			srv.log.Close()
		}
		return nil, fmt.Errorf("listen: %w", err)
	}
	srv.ln = ln
	srv.http = &http.Server{Handler: http.HandlerFunc(srv.serve), ReadHeaderTimeout: 10 * time.Second}
	go srv.http.Serve(ln)
	return srv, nil
}

// URL is the server's base URL, http://127.0.0.1:PORT, without a path.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Port is the port the server listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Close stops the server: delayed answers are abandoned, connections
// closed, and the log file closed once every handler has returned.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	err := s.http.Close()
	s.handlers.Wait()
	if s.log != nil {
		if cerr := s.log.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Requests returns the requests served so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

var geminiPath = regexp.MustCompile(`/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "fake llm server closed", http.StatusServiceUnavailable)
		return
	}
	s.handlers.Add(1)
	s.seq++
	rec := Request{Seq: s.seq, Time: time.Now(), Method: r.Method, Path: r.URL.Path,
		Query: r.URL.RawQuery, Header: redact(r.Header), Conversation: -1}
	over := s.seq > s.maxRequests
	s.mu.Unlock()
	defer s.handlers.Done()

	switch {
	case r.Method == http.MethodHead:
		rec.Reply, rec.Status = "head", http.StatusOK
		s.record(rec)
		w.WriteHeader(http.StatusOK)
		return
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		rec.Reply, rec.Status = "models", http.StatusOK
		s.record(rec)
		writeJSON(w, http.StatusOK, object{"object": "list", "models": []any{},
			"data": []any{object{"id": "fake-model", "object": "model", "created": 0, "owned_by": "fake"}}})
		return
	case r.Method != http.MethodPost:
		s.notFound(w, rec)
		return
	}

	body, err := readBody(r)
	rec.Body = body
	var parsed object
	if err == nil {
		err = json.Unmarshal(body, &parsed)
	}
	if err == nil && parsed == nil {
		err = errors.New("body is not a JSON object")
	}
	if over {
		rec.Reply, rec.Status = "max_requests", http.StatusInternalServerError
		s.record(rec)
		writeJSON(w, rec.Status, object{"error": object{"type": "api_error", "message": "fake llm: request cap reached"}})
		return
	}
	if err != nil {
		rec.Reply, rec.Status = "bad_request", http.StatusBadRequest
		s.record(rec)
		writeJSON(w, rec.Status, object{"error": object{"type": "invalid_request_error", "message": "fake llm: " + err.Error()}})
		return
	}
	for k := range parsed {
		rec.BodyKeys = append(rec.BodyKeys, k)
	}
	slices.Sort(rec.BodyKeys)
	rec.Model = str(parsed["model"])
	rec.Stream = parsed["stream"] == true

	path := r.URL.Path
	gm := geminiPath.FindStringSubmatch(path)
	var x exchange
	switch {
	case strings.HasSuffix(path, "/messages/count_tokens"):
		rec.Protocol, rec.Reply, rec.Status = Anthropic, "count_tokens", http.StatusOK
		s.record(rec)
		writeJSON(w, http.StatusOK, object{"input_tokens": defaultUsage().InputTokens})
		return
	case gm != nil && gm[2] == "countTokens":
		rec.Protocol, rec.Reply, rec.Status, rec.Model = Gemini, "count_tokens", http.StatusOK, gm[1]
		s.record(rec)
		writeJSON(w, http.StatusOK, object{"totalTokens": defaultUsage().InputTokens})
		return
	case strings.HasSuffix(path, "/messages"):
		rec.Protocol, x = Anthropic, anthropicExchange(parsed)
	case strings.HasSuffix(path, "/responses"):
		rec.Protocol, x = Responses, responsesExchange(parsed)
	case strings.HasSuffix(path, "/chat/completions"):
		rec.Protocol, x = Chat, chatExchange(parsed)
	case gm != nil:
		rec.Protocol, x = Gemini, geminiExchange(parsed)
		rec.Model = gm[1]
		rec.Stream = gm[2] == "streamGenerateContent"
	default:
		s.notFound(w, rec)
		return
	}
	rec.Turn, rec.Tools, rec.FirstUser, rec.Tail, rec.System = x.turn, x.tools, x.firstUser, x.tail, x.system

	conv, turn, label := s.pick(x)
	rec.Conversation, rec.Reply, rec.DelayMS = conv, label, turn.DelayMS
	if turn.Error != nil {
		rec.Status = errorStatus(turn.Error)
		s.record(rec)
		if !s.wait(r, turn.DelayMS) {
			return
		}
		writeError(w, rec.Protocol, turn.Error)
		return
	}
	blocks := s.resolve(turn.Blocks, x)
	// A request that demands JSON of a schema gets it, unless the script
	// calls a tool the request offers: clients such as Codex send their
	// output schema with every request of a turn, tool-calling ones
	// included, while side requests (Gemini's router) offer no tools.
	if x.schema != nil && !isJSONText(blocks) && (!hasToolUse(blocks) || len(x.tools) == 0) {
		blocks = []Block{{Type: "text", Text: string(fillSchema(x.schema))}}
		rec.Reply = "schema"
	}
	rec.Blocks, rec.Status = blocks, http.StatusOK
	s.record(rec)
	if !s.wait(r, turn.DelayMS) {
		return
	}
	usage := defaultUsage()
	if turn.Usage != nil {
		usage = *turn.Usage
	}
	rep := reply{blocks: blocks, usage: usage, model: rec.Model, seq: rec.Seq}
	switch rec.Protocol {
	case Anthropic:
		renderAnthropic(w, rep, rec.Stream)
	case Responses:
		renderResponses(w, rep, rec.Stream)
	case Chat:
		renderChat(w, rep, rec.Stream)
	case Gemini:
		renderGemini(w, rep, rec.Stream, r.URL.Query().Get("alt") == "sse")
	}
}

func (s *Server) notFound(w http.ResponseWriter, rec Request) {
	rec.Reply, rec.Status = "not_found", http.StatusNotFound
	s.record(rec)
	writeJSON(w, rec.Status, object{"error": object{"type": "not_found_error", "message": "fake llm: unknown path " + rec.Path}})
}

// pick finds the conversation and turn entry for x, consuming one answer of
// a counted error entry when that is what answers.
func (s *Server) pick(x exchange) (conv int, t Turn, label string) {
	for ci, c := range s.script.Conversations {
		if !strings.Contains(x.firstUser, c.Match) || !strings.Contains(x.system, c.SystemContains) ||
			(c.RequireTools && len(x.tools) == 0) {
			continue
		}
		logical := 0
		for ti, t := range c.Turns {
			if t.Error == nil {
				if logical == x.turn {
					return ci, t, fmt.Sprintf("conv%d/turn%d", ci, x.turn)
				}
				logical++
				continue
			}
			if logical != x.turn {
				continue
			}
			if t.Times == 0 {
				return ci, t, fmt.Sprintf("conv%d/turn%d/error", ci, x.turn)
			}
			s.mu.Lock()
			key := [2]int{ci, ti}
			use := s.served[key] < t.Times
			if use {
				s.served[key]++
			}
			s.mu.Unlock()
			if use {
				return ci, t, fmt.Sprintf("conv%d/turn%d/error", ci, x.turn)
			}
		}
		return ci, Turn{Blocks: []Block{{Type: "text", Text: "(script exhausted)"}}}, fmt.Sprintf("conv%d/exhausted", ci)
	}
	def := s.script.Default
	if len(def) == 0 {
		def = []Block{{Type: "text", Text: "ok"}}
	}
	return -1, Turn{Blocks: def}, "default"
}

// wait holds the answer back for ms milliseconds; false when the client
// went away or the server closed meanwhile.
func (s *Server) wait(r *http.Request, ms int) bool {
	if ms <= 0 {
		return true
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.done:
	}
	return false
}

// record keeps rec and appends it to the log file.
func (s *Server) record(rec Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
	if s.log == nil {
		return
	}
	short := rec
	short.FirstUser = truncate(rec.FirstUser, 400)
	short.Tail = truncate(rec.Tail, 400)
	short.Blocks = nil
	for _, b := range rec.Blocks {
		b.Text = truncate(b.Text, 200)
		short.Blocks = append(short.Blocks, b)
	}
	s.log.Write(append(marshal(short), '\n'))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// secretHeaders are redacted in logs.
var secretHeaders = map[string]bool{
	"authorization": true, "x-api-key": true, "x-goog-api-key": true, "api-key": true,
	"cookie": true, "proxy-authorization": true,
}

func redact(h http.Header) map[string]string {
	out := map[string]string{}
	for k, vs := range h {
		k = strings.ToLower(k)
		v := strings.Join(vs, ", ")
		if secretHeaders[k] {
			scheme, _, found := strings.Cut(v, " ")
			v = "[redacted]"
			if found {
				v = scheme + " [redacted]"
			}
		}
		out[k] = truncate(v, 300)
	}
	return out
}

func readBody(r *http.Request) ([]byte, error) {
	var in io.Reader = http.MaxBytesReader(nil, r.Body, 64<<20)
	switch enc := strings.ToLower(r.Header.Get("Content-Encoding")); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(in)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		in = zr
	default:
		return nil, fmt.Errorf("content-encoding %s not supported", enc)
	}
	return io.ReadAll(in)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data := marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("Request-Id", "req_fake")
	w.WriteHeader(status)
	w.Write(data)
}

// resolve fills templates and turns final blocks into text or a
// StructuredOutput call, as the request allows.
func (s *Server) resolve(blocks []Block, x exchange) []Block {
	out := make([]Block, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case "final":
			if slices.Contains(x.tools, "StructuredOutput") {
				b = Block{Type: "tool_use", Name: "StructuredOutput", Input: b.JSON}
			} else {
				var buf bytes.Buffer
				if json.Compact(&buf, b.JSON) == nil {
					b = Block{Type: "text", Text: buf.String()}
				} else {
					b = Block{Type: "text", Text: string(b.JSON)}
				}
			}
		case "tool_use":
			b.Input = fillTemplates(b.Input, x.tail)
		}
		out = append(out, b)
	}
	return out
}

// isJSONText reports whether blocks are text only and that text is JSON.
func isJSONText(blocks []Block) bool {
	var text strings.Builder
	for _, b := range blocks {
		if b.Type != "text" {
			return false
		}
		text.WriteString(b.Text)
	}
	return json.Valid([]byte(text.String()))
}

var templateRE = regexp.MustCompile(`\{\{re:(.*?)\}\}`)

// fillTemplates replaces every {{re:REGEX}} in the string values of input
// with REGEX's first group (or whole match) found in tail.
func fillTemplates(input json.RawMessage, tail string) json.RawMessage {
	if len(input) == 0 || !bytes.Contains(input, []byte("{{re:")) {
		return input
	}
	var v any
	if json.Unmarshal(input, &v) != nil {
		return input
	}
	return marshal(fillValue(v, tail))
}

func fillValue(v any, tail string) any {
	switch t := v.(type) {
	case string:
		if whole, ok := strings.CutPrefix(t, "{{re:"); ok && strings.HasSuffix(whole, "}}") {
			return search(strings.TrimSuffix(whole, "}}"), tail)
		}
		return templateRE.ReplaceAllStringFunc(t, func(m string) string {
			return search(templateRE.FindStringSubmatch(m)[1], tail)
		})
	case []any:
		for i := range t {
			t[i] = fillValue(t[i], tail)
		}
	case object:
		for k := range t {
			t[k] = fillValue(t[k], tail)
		}
	}
	return v
}

func search(expr, text string) string {
	re, err := regexp.Compile("(?s)" + expr)
	if err != nil {
		return ""
	}
	m := re.FindStringSubmatch(text)
	switch {
	case m == nil:
		return ""
	case len(m) > 1:
		return m[1]
	}
	return m[0]
}

// hasToolUse reports whether blocks call a tool.
func hasToolUse(blocks []Block) bool {
	for _, b := range blocks {
		if b.Type == "tool_use" {
			return true
		}
	}
	return false
}
