package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/server"
)

// The server reads and writes a loop's files only inside a served
// workspace, checked at every use; a loop whose files are wrong is said
// once, and refused with the reason.

// tree is every file under dir with its content, to prove nothing there
// changed.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		data := ""
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			data = string(b)
		}
		out[p] = fi.Mode().String() + " " + data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, v := range after {
		if before[p] != v {
			t.Errorf("%s: %s was written", what, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s: %s was removed", what, p)
		}
	}
}

// refused asserts that a request about a loop is answered with code and
// an error that holds msg.
func (h *harness) refused(method, path string, body any, code int, msg string) {
	h.t.Helper()
	var doc struct {
		Success *bool
		Error   string
	}
	got := h.do(method, path, body, &doc)
	if got != code || doc.Success == nil || *doc.Success || !strings.Contains(doc.Error, msg) {
		h.t.Errorf("%s %s: %d %q; want %d with %q", method, path, got, doc.Error, code, msg)
	}
}

// outsideCopy copies a loop's state file to a folder outside the served
// workspace and returns the copy and that folder.
func outsideCopy(t *testing.T, stateFile string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "aot-loop-state.md")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out, dir
}

func stopServer(h *harness) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}

func TestAViewPointingOutsideTheWorkspacesIsRefusedAndNothingThereIsTouched(t *testing.T) {
	h := start(t, "")
	id := h.create("A1")
	outside, dir := outsideCopy(t, h.loop(id).StateFile)
	stopServer(h)

	// Someone edits the view: the loop's state file is now elsewhere.
	doc := filepath.Join(h.ws, ".loop", id+".json")
	var view map[string]any
	data, err := os.ReadFile(doc)
	if err != nil || json.Unmarshal(data, &view) != nil {
		t.Fatalf("view: %v", err)
	}
	view["state_file"] = outside
	data, _ = json.Marshal(view)
	if err := os.WriteFile(doc, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before := tree(t, dir)

	h2 := start(t, h.ws)
	var list struct {
		Loops []struct {
			LoopID, Status, Error string
		}
	}
	h2.do("GET", "/api/loops", nil, &list)
	if len(list.Loops) != 1 || list.Loops[0].Status != "failed" || !strings.Contains(list.Loops[0].Error, "outside every served workspace") {
		t.Fatalf("loops: %+v", list.Loops)
	}
	const msg = "is outside every served workspace"
	h2.refused("GET", "/api/loops/"+id, nil, 403, msg)
	h2.refused("GET", "/api/loops/"+id+"/atoms", nil, 403, msg)
	h2.refused("POST", "/api/loops/"+id+"/redirect", map[string]any{"reason": "r", "add_atoms": []map[string]any{{"id": "EVIL", "description": "x"}}}, 403, msg)
	h2.refused("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "exec", "agent_command": "true"}, 403, msg)
	h2.refused("POST", "/api/loops/"+id+"/stop", map[string]any{}, 403, msg)
	time.Sleep(300 * time.Millisecond) // several polls and view ticks
	sameTree(t, "the folder outside", before, tree(t, dir))
	if v, _ := os.ReadFile(doc); !bytes.Equal(v, data) {
		t.Error("the view was rewritten from a refused state file")
	}
}

func TestNoLoopIsCreatedThroughALinkOutOfTheWorkspace(t *testing.T) {
	h := start(t, "")
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(h.ws, ".claude"), 0o755)
	if err := os.Symlink(dir, filepath.Join(h.ws, ".claude", "aot-loops")); err != nil {
		t.Fatal(err)
	}
	h.refused("POST", "/api/loops", map[string]any{"title": "t", "goal": "g", "checks": []map[string]string{{"type": "file", "value": "x"}}},
		403, "outside every served workspace")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("written through the link: %v", entries)
	}
}

func TestAStateFileLinkedOutsideIsRefusedAtEveryUseNotOnlyAtCreation(t *testing.T) {
	h := start(t, "")
	id := h.create("A1")
	sf := h.loop(id).StateFile
	all := h.stream("/api/stream", "")
	outside, dir := outsideCopy(t, sf)
	before := tree(t, dir)

	// The loop was created inside; its state file becomes a link out.
	if err := os.Remove(sf); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, sf); err != nil {
		t.Fatal(err)
	}
	all.next(t, "notice", "outside every served workspace")
	h.refused("GET", "/api/loops/"+id+"/graph", nil, 403, "a link to "+outside)
	h.refused("POST", "/api/loops/"+id+"/redirect", map[string]any{"reason": "r", "goal": "elsewhere"}, 403, "outside every served workspace")
	// Its folder too: the journal would be read through the link.
	sameTree(t, "the folder outside", before, tree(t, dir))

	// A link that stays inside the workspace is followed.
	inside := filepath.Join(h.ws, "kept-state.md")
	data, _ := os.ReadFile(outside)
	if err := os.WriteFile(inside, data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(sf)
	if err := os.Symlink(inside, sf); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+id+"/redirect", map[string]any{"reason": "r", "goal": "a new goal"}, &out); code != 200 {
		t.Fatalf("redirect through a link inside: %d %v", code, out)
	}
	if data, _ := os.ReadFile(inside); !strings.Contains(string(data), "a new goal") {
		t.Error("the redirect did not reach the file the link leads to")
	}
	sameTree(t, "the folder outside", before, tree(t, dir))

	// The journal folder linked out is refused as well.
	jdir := filepath.Join(filepath.Dir(inside), "aot-loop")
	os.MkdirAll(jdir, 0o755)
	os.RemoveAll(jdir)
	if err := os.Symlink(dir, jdir); err != nil {
		t.Fatal(err)
	}
	h.refused("GET", "/api/loops/"+id+"/checklist", nil, 403, "outside every served workspace")
	sameTree(t, "the folder outside", before, tree(t, dir))
}

// logFile is the server's log, written to a file the test measures.
type logFile struct{ f *os.File }

func newLogFile(t *testing.T) *logFile {
	f, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &logFile{f}
}

func (l *logFile) String() string {
	data, _ := os.ReadFile(l.f.Name())
	return string(data)
}

// notices counts the notice events a stream got within d.
func (s *sse) notices(d time.Duration) []string {
	var out []string
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return out
			}
			if ev.kind == "notice" {
				out = append(out, ev.data)
			}
		case <-deadline:
			return out
		}
	}
}

func TestABrokenStateFileIsSaidOncePerChangeNotAtEveryPoll(t *testing.T) {
	log := newLogFile(t)
	fast := func(o *server.Options) {
		o.Poll, o.ViewInterval = 10*time.Millisecond, 20*time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(log.f, nil))
	}
	h := start(t, "", fast)
	id := h.create("A1")
	sf := h.loop(id).StateFile
	good, _ := os.ReadFile(sf)
	stopServer(h)

	// After a restart with a garbage state file: a few lines, not a flood.
	if err := os.WriteFile(sf, []byte("---\nobjective: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h2 := start(t, h.ws, fast)
	all := h2.stream("/api/stream", "")
	time.Sleep(1500 * time.Millisecond) // 150 polls, 75 view ticks
	if n := strings.Count(log.String(), "\n"); n > 4 {
		t.Errorf("the log grew by %d lines over 150 polls of one broken loop:\n%s", n, log.String())
	}
	size := len(log.String())
	h2.refused("GET", "/api/loops/"+id, nil, 409, "the loop's state cannot be read")
	h2.refused("GET", "/api/loops/"+id+"/atoms", nil, 409, "the loop's state cannot be read")
	h2.refused("POST", "/api/loops/"+id+"/pause", map[string]any{}, 409, "the loop's state cannot be read")

	// Another breakage is said once more; the streams get one notice each.
	if err := os.WriteFile(sf, []byte("not a state file at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ns := all.notices(time.Second); len(ns) != 1 || !strings.Contains(ns[0], "cannot be read") {
		t.Errorf("notices after the second breakage: %q", ns)
	}
	if grown := len(log.String()) - size; grown == 0 || grown > 1000 {
		t.Errorf("the log grew by %d bytes for one change", grown)
	}
	// Mended, it is served again.
	if err := os.WriteFile(sf, good, 0o644); err != nil {
		t.Fatal(err)
	}
	h2.waitFor("the loop reads again", func() bool {
		var s summary
		return h2.do("GET", "/api/loops/"+id, nil, &s) == 200 && s.Status == "created" && strings.Contains(log.String(), "in order again")
	})
	size = len(log.String())
	time.Sleep(500 * time.Millisecond)
	if grown := len(log.String()) - size; grown != 0 {
		t.Errorf("a mended loop still logs: %s", log.String()[size:])
	}
}

func TestAnUnreadableStateFileIsA409WithTheReason(t *testing.T) {
	h := start(t, "")
	id := h.create("A1")
	sf := h.loop(id).StateFile
	// A folder where the state file was: no reader gets past it, root or not.
	if err := os.Rename(sf, sf+".kept"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sf, 0o755); err != nil {
		t.Fatal(err)
	}
	h.refused("GET", "/api/loops/"+id+"/checklist", nil, 409, "not a regular file")
	h.refused("POST", "/api/loops/"+id+"/redirect", map[string]any{"reason": "r", "goal": "g2"}, 409, "not a regular file")
	os.Remove(sf)
	if err := os.Rename(sf+".kept", sf); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 { // root reads a file of mode 000
		if err := os.Chmod(sf, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(sf, 0o644) })
		h.refused("GET", "/api/loops/"+id, nil, 409, "permission denied")
		h.refused("GET", "/api/loops/"+id+"/graph", nil, 409, "permission denied")
		h.refused("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "exec", "agent_command": "true"}, 409, "permission denied")
		var list struct {
			Loops []struct{ Status, Error string }
		}
		if h.do("GET", "/api/loops", nil, &list); len(list.Loops) != 1 || !strings.Contains(list.Loops[0].Error, "permission denied") {
			t.Errorf("the list: %+v", list.Loops)
		}
		// Mended (its times unchanged), it is served again.
		if err := os.Chmod(sf, 0o644); err != nil {
			t.Fatal(err)
		}
		h.waitFor("the loop reads again", func() bool {
			var s summary
			return h.do("GET", "/api/loops/"+id, nil, &s) == 200 && s.Status == "created"
		})
	}
}

func TestLoopsCreatedInOneWorkspaceShareNoFiles(t *testing.T) {
	h := start(t, "")
	a, b := h.create("SLOW1"), h.create("SLOW2")
	sa, sb := h.loop(a).StateFile, h.loop(b).StateFile
	if sa == sb || filepath.Dir(sa) == filepath.Dir(sb) {
		t.Fatalf("two loops share a state file or its folder: %s, %s", sa, sb)
	}
	for id, sf := range map[string]string{a: sa, b: sb} {
		if want := filepath.Join(h.ws, ".claude", "aot-loops", id, "aot-loop-state.md"); sf != want {
			t.Errorf("loop %s: state file %s; want %s", id, sf, want)
		}
	}
	h.startLoop(a)
	h.startLoop(b)
	h.waitFor("both run at once", func() bool { return len(h.loop(a).Running) == 1 && len(h.loop(b).Running) == 1 })
	os.WriteFile(filepath.Join(h.ws, "release"), nil, 0o644)
	h.waitFor("both complete", func() bool { return h.loop(a).Status == "completed" && h.loop(b).Status == "completed" })
	// Each journal holds its own loop's atom only.
	for id, want := range map[string]string{a: "SLOW1", b: "SLOW2"} {
		var evs struct {
			Events []struct {
				Event struct{ Atom string } `json:"event"`
			}
		}
		h.do("GET", "/api/loops/"+id+"/events?limit=1000", nil, &evs)
		for _, e := range evs.Events {
			if e.Event.Atom != "" && e.Event.Atom != want {
				t.Errorf("loop %s's journal holds atom %s", id, e.Event.Atom)
			}
		}
		if len(evs.Events) == 0 {
			t.Errorf("loop %s has no journal", id)
		}
	}
}

func TestAWorkspaceServedThroughALinkServesItsLoops(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	h := start(t, link)
	id := h.create("A1")
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+id+"/redirect", map[string]any{"reason": "r", "goal": "through the link"}, &out); code != 200 {
		t.Fatalf("redirect: %d %v", code, out)
	}
	if data, err := os.ReadFile(filepath.Join(real, ".claude", "aot-loops", id, "aot-loop-state.md")); err != nil || !strings.Contains(string(data), "through the link") {
		t.Errorf("the state file in the linked folder: %v", err)
	}
}
