package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/cli"
	"github.com/aot-loop/aot/internal/server"
)

// The test binary is also the aot that the server starts loops with.
const asAOT = "AOT_SERVER_TEST_AS_AOT"

func TestMain(m *testing.M) {
	if os.Getenv(asAOT) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Setenv(asAOT, "1")
	os.Exit(m.Run())
}

// agentScript is an exec agent: atoms whose id starts with SLOW wait for a
// file named release (at most 20 s), others finish at once.
const agentScript = `echo "$AOT_ATOM_ID" >> calls.log
case "$AOT_ATOM_ID" in
SLOW*)
  echo "working on $AOT_ATOM_ID" >&2
  i=0; while [ ! -f release ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done ;;
esac
touch "$AOT_ATOM_ID.done"
echo '{"success": true, "summary": "did '"$AOT_ATOM_ID"'", "artifacts": ["'"$AOT_ATOM_ID"'.done"], "usage": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01}}'
`

type harness struct {
	t     *testing.T
	srv   *server.Server
	base  string
	token string
	ws    string
}

// start serves ws (a new folder when ""), its options edited by edit.
func start(t *testing.T, ws string, edit ...func(*server.Options)) *harness {
	t.Helper()
	if ws == "" {
		ws = t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(agentScript), 0o755); err != nil {
		t.Fatal(err)
	}
	token, err := server.LoadToken(filepath.Join(t.TempDir(), "token"), false)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{Workspaces: []string{ws}, Token: token, Exe: exe}
	for _, e := range edit {
		e(&opts)
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	h := &harness{t: t, srv: srv, base: "http://" + ln.Addr().String(), token: token, ws: ws}
	h.waitFor("the server answers", func() bool {
		r, err := http.Get(h.base + "/api/health")
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == 200
	})
	t.Cleanup(func() {
		// Stop what the test started, then the server.
		req, _ := http.NewRequest("GET", h.base+"/api/loops", nil)
		req.Header.Set("Authorization", "Bearer "+h.token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var list struct{ Loops []map[string]any }
			json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			for _, l := range list.Loops {
				if e, _ := l["engine"].(map[string]any); e != nil && e["running"] == true {
					h.do("POST", "/api/loops/"+l["loop_id"].(string)+"/stop", map[string]any{}, nil)
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return h
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do sends a request with the token and decodes the JSON answer into out.
func (h *harness) do(method, path string, body any, out any) int {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, h.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+h.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			h.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

func (h *harness) raw(req *http.Request) (int, string) {
	h.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

type summary struct {
	LoopID    string `json:"loop_id"`
	Status    string `json:"status"`
	StateFile string `json:"state_file"`
	Engine    struct {
		Running bool `json:"running"`
		Paused  bool `json:"paused"`
	} `json:"engine"`
	Progress struct{ Total, Resolved int } `json:"progress"`
	Running  []struct{ Atom string }       `json:"running"`
	Usage    struct {
		Tokens  int64   `json:"tokens"`
		CostUSD float64 `json:"cost_usd"`
	} `json:"usage"`
}

func (h *harness) loop(id string) summary {
	h.t.Helper()
	var s summary
	if code := h.do("GET", "/api/loops/"+id, nil, &s); code != 200 {
		h.t.Fatalf("GET loop %s: %d", id, code)
	}
	return s
}

// create makes a loop of the given atoms through the API (atoms named
// SLOW* wait for the release file).
func (h *harness) create(atoms ...string) string {
	h.t.Helper()
	var checks []map[string]string
	var as []map[string]any
	for _, a := range atoms {
		as = append(as, map[string]any{"id": a, "description": "make " + a + ".done"})
		checks = append(checks, map[string]string{"name": a, "type": "file", "value": a + ".done"})
	}
	var s summary
	code := h.do("POST", "/api/loops", map[string]any{
		"title": "test loop", "description": "made by a test", "goal": "make the files",
		"background": "b", "deliverables": "d", "definition_of_done": "the files exist",
		"checks": checks, "atoms": as, "constraints": map[string]any{"max_parallel_agents": 1},
	}, &s)
	if code != 201 {
		h.t.Fatalf("create: %d %+v", code, s)
	}
	return s.LoopID
}

func (h *harness) startLoop(id string) {
	h.t.Helper()
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "exec", "agent_command": "sh " + filepath.Join(h.ws, "agent.sh")}, &out); code != 202 {
		h.t.Fatalf("start: %d %v", code, out)
	}
}

func TestAccessNeedsTheTokenAndOurOwnHostAndOrigin(t *testing.T) {
	h := start(t, "")
	get := func(path string, edit func(*http.Request)) (int, string) {
		req, _ := http.NewRequest("GET", h.base+path, nil)
		if edit != nil {
			edit(req)
		}
		return h.raw(req)
	}
	if code, body := get("/api/loops", nil); code != 401 || !strings.Contains(body, `"error": "missing or wrong token`) {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, _ := get("/api/loops", func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong") }); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	if code, body := get("/api/loops", func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+h.token)
		r.Host = "evil.example:80"
	}); code != 403 || !strings.Contains(body, "foreign Host") {
		t.Errorf("foreign host: %d %s", code, body)
	}
	if code, body := get("/api/loops", func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+h.token)
		r.Header.Set("Origin", "http://evil.example")
	}); code != 403 || !strings.Contains(body, "origin") {
		t.Errorf("foreign origin: %d %s", code, body)
	}
	// The token URL sets an HttpOnly cookie and drops the token from the address.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(h.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/" {
		t.Fatalf("token URL: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "aot_token" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie = %+v", cookie)
	}
	if code, _ := get("/api/loops", func(r *http.Request) { r.AddCookie(cookie) }); code != 200 {
		t.Errorf("cookie read: %d", code)
	}
	// A change with the cookie needs our Origin (a form post from elsewhere has none or another).
	post := func(origin string) int {
		req, _ := http.NewRequest("POST", h.base+"/api/loops", strings.NewReader(`{"title": "x"}`))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(cookie)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		code, _ := h.raw(req)
		return code
	}
	if code := post(""); code != 403 {
		t.Errorf("cookie POST without Origin: %d", code)
	}
	if code := post(h.base); code != 400 { // it got through to validation: the goal is missing
		t.Errorf("cookie POST from our page: %d", code)
	}
	if code, _ := get("/api/health", nil); code != 200 {
		t.Errorf("health needs no token: %d", code)
	}
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	h := start(t, "")
	id := h.create("A1")
	before, err := os.ReadFile(h.loop(id).StateFile)
	if err != nil {
		t.Fatal(err)
	}
	send := func(method, path, ctype, body string) (int, string) {
		req, _ := http.NewRequest(method, h.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+h.token)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		return h.raw(req)
	}
	for _, tc := range []struct {
		name, method, path, ctype, body string
		code                            int
		msg                             string
	}{
		{"unknown route", "GET", "/api/nope", "", "", 404, "no such route"},
		{"unknown loop", "GET", "/api/loops/loop-v2-20260101-zzzzzz", "", "", 404, "no loop"},
		{"unknown atom", "GET", "/api/loops/" + id + "/atoms/NOPE", "", "", 404, "no atom"},
		{"wrong method", "DELETE", "/api/loops/" + id + "/stop", "", "", 405, "use POST"},
		{"not JSON", "POST", "/api/loops/" + id + "/redirect", "text/plain", "reason=x", 415, "must be JSON"},
		{"malformed", "POST", "/api/loops/" + id + "/redirect", "application/json", `{"reason": `, 400, "bad JSON"},
		{"unknown field", "POST", "/api/loops/" + id + "/redirect", "application/json", `{"reason": "r", "goal2": "x"}`, 400, "unknown field"},
		{"two documents", "POST", "/api/loops/" + id + "/redirect", "application/json", `{"reason": "r"} {}`, 400, "more than one"},
		{"no reason", "POST", "/api/loops/" + id + "/redirect", "application/json", `{"goal": "x"}`, 400, "reason: required"},
		{"empty change", "POST", "/api/loops/" + id + "/redirect", "application/json", `{"reason": "r"}`, 400, "changes nothing"},
		{"invalid change", "POST", "/api/loops/" + id + "/redirect", "application/json", `{"reason": "r", "add_atoms": [{"id": "B", "description": "b", "depends_on": ["MISSING"]}]}`, 422, "MISSING"},
		{"oversized", "POST", "/api/loops/" + id + "/redirect", "application/json", `{"reason": "` + strings.Repeat("x", 2<<20) + `"}`, 413, "larger than"},
		{"pause without engine", "POST", "/api/loops/" + id + "/pause", "application/json", `{}`, 409, "no engine runs"},
		{"bad events query", "GET", "/api/loops/" + id + "/events?limit=0", "", "", 400, "limit"},
		{"bad output query", "GET", "/api/loops/" + id + "/output?atom=A1", "", "", 400, "attempt"},
		{"create without goal", "POST", "/api/loops", "application/json", `{"title": "t"}`, 400, "goal: required"},
		{"create with a cycle", "POST", "/api/loops", "application/json", `{"title": "t", "goal": "g", "checks": [{"type": "file", "value": "x"}], "atoms": [{"id": "A", "description": "a", "depends_on": ["B"]}, {"id": "B", "description": "b", "depends_on": ["A"]}]}`, 400, "cycle"},
		{"create with an atom id that is a path", "POST", "/api/loops", "application/json", `{"title": "t", "goal": "g", "checks": [{"type": "file", "value": "x"}], "atoms": [{"id": "../../evil", "description": "a"}]}`, 400, "atoms[0].id: the atom id \"../../evil\" starts with '.'"},
		{"create from a state whose atom id is a path", "POST", "/api/loops", "application/json", `{"title": "t", "state": ` + strconvQuote(strings.Replace(existingState, "id: A1", "id: a/../../evil", 1)) + `}`, 400, "atoms[0].id: the atom id \"a/../../evil\" holds '/'"},
		{"create in a foreign workspace", "POST", "/api/loops", "application/json", `{"title": "t", "goal": "g", "workspace": "/etc"}`, 400, "not served"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := send(tc.method, tc.path, tc.ctype, tc.body)
			var doc struct {
				Success *bool
				Error   string
			}
			if err := json.Unmarshal([]byte(body), &doc); err != nil {
				t.Fatalf("not JSON: %q", body)
			}
			if code != tc.code || doc.Success == nil || *doc.Success || !strings.Contains(doc.Error, tc.msg) {
				t.Errorf("%d %s; want %d with %q", code, body, tc.code, tc.msg)
			}
		})
	}
	after, _ := os.ReadFile(h.loop(id).StateFile)
	if !bytes.Equal(before, after) {
		t.Error("a refused request changed the state file")
	}
	var list struct{ Loops []summary }
	h.do("GET", "/api/loops", nil, &list)
	if len(list.Loops) != 1 {
		t.Errorf("refused creations registered loops: %d", len(list.Loops))
	}
	if dirs, _ := os.ReadDir(filepath.Join(h.ws, ".claude", "aot-loops")); len(dirs) != 1 {
		t.Errorf("refused creations left folders: %v", dirs)
	}
}

func strconvQuote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}

// sse reads a stream's events.
type sse struct {
	resp   *http.Response
	events chan sseEvent
}

type sseEvent struct{ id, kind, data string }

func (h *harness) stream(path, lastID string) *sse {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		h.t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sse{resp: resp, events: make(chan sseEvent, 10000)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.kind != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	h.t.Cleanup(func() { resp.Body.Close() })
	return s
}

// next waits for an event of kind whose data contains want.
func (s *sse) next(t *testing.T, kind, want string) sseEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("stream closed before a %s event with %q", kind, want)
			}
			if ev.kind == kind && strings.Contains(ev.data, want) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event with %q within 20s", kind, want)
		}
	}
}

func TestALoopRunsPausesResumesAndStopsThroughTheAPI(t *testing.T) {
	h := start(t, "")
	id := h.create("SLOW1", "A2", "SLOW3")
	all := h.stream("/api/stream", "")
	one := h.stream("/api/loops/"+id+"/stream", "")
	h.startLoop(id)
	h.waitFor("SLOW1 runs", func() bool {
		s := h.loop(id)
		return len(s.Running) == 1 && s.Running[0].Atom == "SLOW1"
	})
	one.next(t, "journal", `"type":"atom_start"`)
	all.next(t, "journal", `"loop_id":"`+id+`"`)

	// Pause: the running agent finishes, nothing new starts.
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+id+"/pause", map[string]any{"reason": "look"}, &out); code != 200 {
		t.Fatalf("pause: %d %v", code, out)
	}
	if s := h.loop(id); s.Status != "paused" || !s.Engine.Paused {
		t.Fatalf("after pause: %+v", s)
	}
	one.next(t, "journal", `"type":"pause"`)
	os.WriteFile(filepath.Join(h.ws, "release"), nil, 0o644)
	h.waitFor("SLOW1 resolved", func() bool { return h.loop(id).Progress.Resolved == 1 })
	if _, err := os.Stat(filepath.Join(h.ws, "A2.done")); err == nil {
		t.Fatal("A2 ran while the loop was paused")
	}
	if code := h.do("POST", "/api/loops/"+id+"/pause", map[string]any{}, &out); code != 200 {
		t.Errorf("a second pause: %d %v", code, out)
	}
	os.Remove(filepath.Join(h.ws, "release"))
	if code := h.do("POST", "/api/loops/"+id+"/resume", map[string]any{}, &out); code != 200 {
		t.Fatalf("resume: %d %v", code, out)
	}
	if code := h.do("POST", "/api/loops/"+id+"/resume", map[string]any{}, &out); code != 409 {
		t.Errorf("resume of a running loop: %d %v", code, out)
	}
	h.waitFor("SLOW3 runs", func() bool {
		s := h.loop(id)
		return len(s.Running) == 1 && s.Running[0].Atom == "SLOW3"
	})
	// The live output of the running agent.
	h.waitFor("SLOW3's output", func() bool {
		var o struct{ Data, Outcome string }
		return h.do("GET", "/api/loops/"+id+"/output?atom=SLOW3&attempt=1", nil, &o) == 200 && strings.Contains(o.Data, "working on SLOW3") && o.Outcome == "running"
	})
	// Starting a running loop is a conflict.
	if code := h.do("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "exec", "agent_command": "true"}, &out); code != 409 {
		t.Errorf("start of a running loop: %d %v", code, out)
	}
	// Stop acts within a second.
	began := time.Now()
	if code := h.do("POST", "/api/loops/"+id+"/stop", map[string]any{"reason": "enough"}, &out); code != 200 {
		t.Fatalf("stop: %d %v", code, out)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("stop took %s", took)
	}
	if s := h.loop(id); s.Status != "user_exit" || s.Engine.Running {
		t.Errorf("after stop: %+v", s)
	}
	one.next(t, "journal", `"type":"stop"`)

	// What the loop did, read back.
	var atoms struct {
		Atoms []struct {
			ID, Status string
			Binding    *struct{ Summary string }
			CostUSD    float64 `json:"cost_usd"`
		}
	}
	h.do("GET", "/api/loops/"+id+"/atoms", nil, &atoms)
	if len(atoms.Atoms) != 3 || atoms.Atoms[0].Status != "resolved" || atoms.Atoms[0].Binding == nil || atoms.Atoms[0].CostUSD != 0.01 {
		t.Errorf("atoms: %+v", atoms)
	}
	var costs struct {
		Total struct {
			Attempts int
			CostUSD  float64 `json:"cost_usd"`
		}
		Atoms map[string]struct{ Attempts int }
	}
	h.do("GET", "/api/loops/"+id+"/costs", nil, &costs)
	if costs.Atoms["SLOW1"].Attempts != 1 || costs.Atoms["A2"].Attempts != 1 {
		t.Errorf("costs: %+v", costs)
	}
	var evs struct {
		Events []struct {
			Seq   int
			Event struct{ Type string }
		}
		Next int
	}
	h.do("GET", "/api/loops/"+id+"/events?after=0&limit=2", nil, &evs)
	if len(evs.Events) != 2 || evs.Events[0].Seq != 1 || evs.Next != 2 {
		t.Errorf("events: %+v", evs)
	}
	var attempts struct {
		Attempts []struct{ Atom, Outcome string }
	}
	h.do("GET", "/api/loops/"+id+"/attempts", nil, &attempts)
	if len(attempts.Attempts) != 3 || attempts.Attempts[2].Outcome != "reset" {
		t.Errorf("attempts: %+v", attempts)
	}
}

func TestTheStreamsResumeFromLastEventID(t *testing.T) {
	h := start(t, "")
	id := h.create("A1", "A2", "A3")
	h.startLoop(id)
	h.waitFor("the loop ends", func() bool { s := h.loop(id); return !s.Engine.Running && s.Status == "completed" })
	var evs struct{ Next int }
	h.do("GET", "/api/loops/"+id+"/events?limit=1000", nil, &evs)
	if evs.Next < 6 {
		t.Fatalf("only %d events", evs.Next)
	}
	// A client that saw events up to 3 gets 4 on, in order, and nothing twice.
	s := h.stream("/api/loops/"+id+"/stream", "3")
	for want := 4; want <= evs.Next; want++ {
		ev := s.next(t, "journal", "")
		if ev.id != fmt.Sprint(want) {
			t.Fatalf("event id %s, want %d", ev.id, want)
		}
	}
	// The all-loops stream replays what it keeps.
	all := h.stream("/api/stream", "1")
	if ev := all.next(t, "journal", ""); ev.id != "2" {
		t.Errorf("all-loops replay starts at %s", ev.id)
	}
	if code, body := func() (int, string) {
		req, _ := http.NewRequest("GET", h.base+"/api/stream", nil)
		req.Header.Set("Authorization", "Bearer "+h.token)
		req.Header.Set("Last-Event-ID", "x")
		return h.raw(req)
	}(); code != 400 || !strings.Contains(body, "Last-Event-ID") {
		t.Errorf("bad Last-Event-ID: %d %s", code, body)
	}
}

func TestConcurrentControlCallsLeaveAValidLoop(t *testing.T) {
	h := start(t, "")
	id := h.create("SLOW1", "SLOW2")
	h.startLoop(id)
	h.waitFor("SLOW1 runs", func() bool { return len(h.loop(id).Running) == 1 })
	var wg sync.WaitGroup
	codes := make(chan int, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			action := []string{"pause", "resume", "pause", "redirect"}[i%4]
			body := map[string]any{}
			if action == "redirect" {
				body = map[string]any{"reason": fmt.Sprint("r", i), "max_iterations": 30 + i}
			}
			var out map[string]any
			code := h.do("POST", "/api/loops/"+id+"/"+action, body, &out)
			if code != 200 && code != 409 {
				t.Logf("%s: %d %v", action, code, out)
			}
			codes <- code
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 && c != 409 {
			t.Errorf("a concurrent control call answered %d", c)
		}
	}
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+id+"/stop", map[string]any{}, &out); code != 200 {
		t.Fatalf("stop: %d %v", code, out)
	}
	var full struct {
		Corrections []struct{ Type string }
	}
	h.do("GET", "/api/loops/"+id, nil, &full)
	if len(full.Corrections) != 10 || full.Corrections[0].Type != "constraint_change" {
		t.Errorf("corrections: %+v", full.Corrections)
	}
	cmd := cli.Main([]string{"validate", "--state-file", h.loop(id).StateFile}, nil, io.Discard, io.Discard)
	if cmd != 0 {
		t.Error("the state file is not valid after concurrent control calls")
	}
}

func TestServingOnlyOnLoopback(t *testing.T) {
	token, _ := server.LoadToken(filepath.Join(t.TempDir(), "token"), false)
	srv, err := server.New(server.Options{Workspaces: []string{t.TempDir()}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := srv.Serve(ln); err == nil || !strings.Contains(err.Error(), "loopback address only") {
		t.Errorf("Serve on 0.0.0.0: %v", err)
	}
}

func TestTheTokenFileIsOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "aot", "serve-token")
	tok, err := server.LoadToken(path, false)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	di, _ := os.Stat(filepath.Dir(path))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("modes %v %v", fi.Mode(), di.Mode())
	}
	if again, _ := server.LoadToken(path, false); again != tok {
		t.Error("the token changed between starts")
	}
	if renewed, _ := server.LoadToken(path, true); renewed == tok {
		t.Error("--new-token kept the token")
	}
	os.Chmod(path, 0o644)
	if _, err := server.LoadToken(path, false); err == nil || !strings.Contains(err.Error(), "lets others read it") {
		t.Errorf("a readable token file: %v", err)
	}
}

const existingState = `---
objective:
  goal: "the workspace's own loop"
  base_case:
    checklist:
      - item: "tests"
        check:
          type: command
          value: "test -f A1.done && test -f A2.done && printf '%s\n' '{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestA\"}' '{\"Action\":\"fail\",\"Package\":\"p\",\"Test\":\"TestB\"}' 'coverage: 81.5% of statements'"
  background_intent: "b"
  deliverables: "d"
  definition_of_done: "c"
control:
  status: pending
  iteration: 0
  stall_count: 0
  prev_pending_count: -1
  stop_requested: false
  stop_reason: null
  redirect_requested: false
atoms:
  - id: A1
    description: "one"
    status: pending
    depends_on: []
  - id: A2
    description: "two"
    status: pending
    depends_on: [A1]
decompositions: []
or_groups: {}
bindings: {}
trail: []
---
`

func TestTheWorkspacesOwnStateFileIsALoopWithItsCCWView(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".claude"), 0o755)
	if err := os.WriteFile(filepath.Join(ws, ".claude", "aot-loop-state.md"), []byte(existingState), 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, ws)
	var list struct{ Loops []summary }
	h.do("GET", "/api/loops", nil, &list)
	if len(list.Loops) != 1 || list.Loops[0].Status != "created" || !strings.HasPrefix(list.Loops[0].LoopID, "loop-v2-") {
		t.Fatalf("loops: %+v", list.Loops)
	}
	id := list.Loops[0].LoopID
	doc := filepath.Join(ws, ".loop", id+".json")
	h.waitFor("the CCW view", func() bool { _, err := os.Stat(doc); return err == nil })

	h.startLoop(id)
	h.waitFor("the loop ends", func() bool {
		s := h.loop(id)
		return !s.Engine.Running && s.Status != "created" && s.Status != "running"
	})
	if s := h.loop(id); s.Status != "completed" {
		t.Fatalf("status %s", s.Status)
	}
	// The view follows the journal: completed, tasks done, test results
	// parsed from the check's whole output.
	var ccw struct {
		Status     string `json:"status"`
		SkillState struct {
			Validate struct {
				PassRate float64 `json:"pass_rate"`
				Coverage *float64
			} `json:"validate"`
		} `json:"skill_state"`
	}
	h.waitFor("the view says completed", func() bool {
		data, err := os.ReadFile(doc)
		return err == nil && json.Unmarshal(data, &ccw) == nil && ccw.Status == "completed"
	})
	if ccw.SkillState.Validate.PassRate != 50 || ccw.SkillState.Validate.Coverage == nil || *ccw.SkillState.Validate.Coverage != 81.5 {
		t.Errorf("validate: %+v", ccw.SkillState.Validate)
	}
	tasks, err := os.ReadFile(filepath.Join(ws, ".loop", id+".tasks.jsonl"))
	if err != nil || strings.Count(string(tasks), "\n") != 2 {
		t.Errorf("tasks: %q %v", tasks, err)
	}
	for _, f := range []string{"develop.md", "debug.md", "validate.md", "summary.md", "changes.log", "debug.log"} {
		if _, err := os.Stat(filepath.Join(ws, ".loop", id+".progress", f)); err != nil {
			t.Errorf("progress file: %v", err)
		}
	}
	var check struct {
		Passed *bool
		Items  []struct {
			Item   string
			Passed bool
		}
	}
	h.do("GET", "/api/loops/"+id+"/checklist", nil, &check)
	if check.Passed == nil || !*check.Passed || len(check.Items) != 1 || check.Items[0].Item != "tests" {
		t.Errorf("checklist: %+v", check)
	}
	// The same picture as aot graph.
	req, _ := http.NewRequest("GET", h.base+"/api/loops/"+id+"/graph?format=svg", nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	if code, body := h.raw(req); code != 200 || !strings.Contains(body, "<svg") || !strings.Contains(body, "A2") {
		t.Errorf("graph svg: %d %.200s", code, body)
	}
	var g struct{ Nodes []struct{ ID, Status string } }
	if h.do("GET", "/api/loops/"+id+"/graph", nil, &g); len(g.Nodes) != 2 {
		t.Errorf("graph json: %+v", g)
	}

	// A server started again finds the same loop under the same id.
	h2 := start(t, ws)
	var again struct{ Loops []summary }
	h2.do("GET", "/api/loops", nil, &again)
	if len(again.Loops) != 1 || again.Loops[0].LoopID != id || again.Loops[0].Status != "completed" {
		t.Errorf("after a restart: %+v", again.Loops)
	}
}

func TestADamagedCCWDocumentIsRebuiltMidRun(t *testing.T) {
	h := start(t, "")
	id := h.create("SLOW1", "A2")
	all := h.stream("/api/stream", "")
	h.startLoop(id)
	h.waitFor("SLOW1 runs", func() bool { return len(h.loop(id).Running) == 1 })
	doc := filepath.Join(h.ws, ".loop", id+".json")
	h.waitFor("the view", func() bool { _, err := os.Stat(doc); return err == nil })
	var before map[string]any
	data, _ := os.ReadFile(doc)
	json.Unmarshal(data, &before)

	os.Remove(doc)
	all.next(t, "notice", "rebuilt")
	h.waitFor("the view is back", func() bool {
		var now map[string]any
		data, err := os.ReadFile(doc)
		return err == nil && json.Unmarshal(data, &now) == nil && now["title"] == before["title"] && now["created_at"] == before["created_at"]
	})
	os.WriteFile(doc, []byte(`{"loop_id": "trunc`), 0o644)
	all.next(t, "notice", "rebuilt")
	os.WriteFile(filepath.Join(h.ws, "release"), nil, 0o644)
	h.waitFor("the loop completes", func() bool { return h.loop(id).Status == "completed" })
	h.waitFor("the view says completed, with its title", func() bool {
		var now map[string]any
		data, err := os.ReadFile(doc)
		return err == nil && json.Unmarshal(data, &now) == nil && now["status"] == "completed" && now["title"] == "test loop"
	})

	// A server that starts with the document gone rebuilds it from the
	// progress files and the journal, title and all.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.srv.Shutdown(ctx)
	os.WriteFile(doc, []byte("garbage"), 0o644)
	h2 := start(t, h.ws)
	s := h2.loop(id)
	if s.Status != "completed" {
		t.Errorf("after rebuild: %+v", s)
	}
	var list struct {
		Loops []struct {
			Title     string    `json:"title"`
			CreatedAt time.Time `json:"created_at"`
		}
	}
	h2.do("GET", "/api/loops", nil, &list)
	if len(list.Loops) != 1 || list.Loops[0].Title != "test loop" {
		t.Errorf("rebuilt loop: %+v", list.Loops)
	}
}

// completedWithAFailedChoice is a completed loop whose OR group tried A2,
// which failed, and then A2b, which resolved.
const completedWithAFailedChoice = `---
objective:
  goal: "first goal line\nand a second line"
  base_case:
    checklist:
      - item: "done"
        check:
          type: file
          value: "A1.done"
  background_intent: "b"
  deliverables: "d"
  definition_of_done: "c"
control:
  status: completed
  iteration: 3
  stall_count: 0
  prev_pending_count: -1
  stop_requested: false
  stop_reason: "base case passed: every check of the checklist holds"
  redirect_requested: false
atoms:
  - id: A1
    description: "one"
    status: resolved
    depends_on: []
  - id: A2
    description: "two"
    status: pending
    depends_on: [A1]
    or_group: way
  - id: A2b
    description: "two, the other way"
    status: resolved
    depends_on: [A1]
    or_group: way
decompositions: []
or_groups:
  way:
    choices: [A2, A2b]
    selected: A2b
    failed: [A2]
bindings: {}
trail: []
---
`

func TestTheSummaryCountsSetAsideChoicesAsSettledAndTheTitleFollowsTheGoal(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".claude"), 0o755)
	if err := os.WriteFile(filepath.Join(ws, ".claude", "aot-loop-state.md"), []byte(completedWithAFailedChoice), 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, ws)
	type doc struct {
		LoopID   string `json:"loop_id"`
		Title    string `json:"title"`
		Status   string `json:"status"`
		Progress struct {
			Total, Resolved, Pending int
			SetAside                 int `json:"set_aside"`
			Settled, Percent         int
		} `json:"progress"`
		Iteration        int        `json:"iteration"`
		CurrentIteration int        `json:"current_iteration"`
		StartedAt        *time.Time `json:"started_at"`
		EndedAt          *time.Time `json:"ended_at"`
	}
	var list struct{ Loops []doc }
	h.do("GET", "/api/loops", nil, &list)
	if len(list.Loops) != 1 {
		t.Fatalf("loops: %+v", list.Loops)
	}
	s := list.Loops[0]
	if s.Status != "completed" || s.Progress.Total != 3 || s.Progress.Resolved != 2 || s.Progress.SetAside != 1 || s.Progress.Settled != 3 || s.Progress.Percent != 100 {
		t.Errorf("a completed loop with a failed OR choice: %+v", s)
	}
	if s.Title != "first goal line and a second line" || s.Iteration != 3 || s.CurrentIteration != 3 || s.StartedAt != nil || s.EndedAt != nil {
		t.Errorf("title, iterations, times of a loop that never ran here: %+v", s)
	}
	// A redirect of the goal: the title follows.
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+s.LoopID+"/redirect", map[string]any{"reason": "the aim moved", "goal": "the new goal"}, &out); code != 200 {
		t.Fatalf("redirect: %d %v", code, out)
	}
	var after doc
	h.do("GET", "/api/loops/"+s.LoopID, nil, &after)
	if after.Title != "the new goal" {
		t.Errorf("after a redirect of the goal the title is %q", after.Title)
	}
}

func TestTheSummaryCountsTheSweepUnderWayAndTheRunsTimes(t *testing.T) {
	h := start(t, "")
	id := h.create("SLOW1")
	before := time.Now().Add(-time.Second)
	h.startLoop(id)
	type doc struct {
		Status           string     `json:"status"`
		Iteration        int        `json:"iteration"`
		CurrentIteration int        `json:"current_iteration"`
		StartedAt        *time.Time `json:"started_at"`
		EndedAt          *time.Time `json:"ended_at"`
		Progress         struct{ Percent int }
		Bounds           []struct {
			Name              string
			Limit, Used, Left float64
		}
		Running []struct{ Atom string }
	}
	var s doc
	h.waitFor("SLOW1's agent runs", func() bool {
		h.do("GET", "/api/loops/"+id, nil, &s)
		return s.Status == "running" && s.StartedAt != nil && len(s.Running) > 0
	})
	if s.Iteration != 0 || s.CurrentIteration != 1 || s.StartedAt.Before(before) || s.EndedAt != nil || s.Progress.Percent != 0 {
		t.Errorf("while the first sweep runs: %+v", s)
	}
	bound := func(name string) string {
		for _, b := range s.Bounds {
			if b.Name == name {
				return fmt.Sprintf("%v/%v/%v", b.Limit, b.Used, b.Left)
			}
		}
		return "absent"
	}
	if got := bound("max_parallel_agents"); got != "1/1/0" {
		t.Errorf("max_parallel_agents while SLOW1 runs (limit/used/left): %s", got)
	}
	if got := bound("max_iterations"); got != "20/0/20" {
		t.Errorf("max_iterations in the first sweep (limit/used/left): %s", got)
	}
	if got := bound("max_cost_usd"); got != "absent" {
		t.Errorf("a limit not set is listed: %s", got)
	}
	if err := os.WriteFile(filepath.Join(h.ws, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the loop completes", func() bool {
		h.do("GET", "/api/loops/"+id, nil, &s)
		return s.Status == "completed"
	})
	if s.Progress.Percent != 100 || s.CurrentIteration < 1 || s.CurrentIteration != s.Iteration || s.EndedAt == nil || s.EndedAt.Before(*s.StartedAt) {
		t.Errorf("after completing: %+v", s)
	}
}

// A state file edited into one that does not validate (a cycle) is shown
// as a failed loop with the reason, not as a plain stopped one.
func TestALoopWhoseStateDoesNotValidateIsFailedWithItsReason(t *testing.T) {
	h := start(t, "")
	id := h.create("A1", "A2")
	type doc struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		StateFile string `json:"state_file"`
	}
	var s doc
	if code := h.do("GET", "/api/loops/"+id, nil, &s); code != 200 || s.Status == "failed" || s.StateFile == "" {
		t.Fatalf("a new loop: %d %+v", code, s)
	}
	data, err := os.ReadFile(s.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	// A2 depends on A1 and A1 on A2.
	edited := strings.Replace(string(data), "  - id: A1\n    description: \"make A1.done\"\n    status: pending\n    depends_on: []", "  - id: A1\n    description: \"make A1.done\"\n    status: pending\n    depends_on: [A2]", 1)
	edited = strings.Replace(edited, "  - id: A2\n    description: \"make A2.done\"\n    status: pending\n    depends_on: []", "  - id: A2\n    description: \"make A2.done\"\n    status: pending\n    depends_on: [A1]", 1)
	if strings.Count(edited, "depends_on: [A") != 2 {
		t.Fatalf("the test could not make a cycle in:\n%s", data)
	}
	if err := os.WriteFile(s.StateFile, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the loop shows as failed", func() bool {
		h.do("GET", "/api/loops/"+id, nil, &s)
		return s.Status == "failed"
	})
	if !strings.Contains(s.Error, "cycle") {
		t.Errorf("the reason does not name the cycle: %q", s.Error)
	}
}
