package server_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aot-loop/aot/internal/cli"
	"github.com/aot-loop/aot/internal/journal"
)

// The commands and the API steer a local loop through the same controls:
// what one face did, the other sees and continues, on the same engine.
func TestTheCommandsAndTheAPISteerOneLocalEngine(t *testing.T) {
	h := start(t, "")
	id := h.create("SLOW1", "A2")
	sf := h.loop(id).StateFile
	h.startLoop(id)
	h.waitFor("SLOW1 runs", func() bool {
		s := h.loop(id)
		return len(s.Running) == 1 && s.Running[0].Atom == "SLOW1"
	})
	aot := func(args ...string) (int, map[string]any) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := cli.Main(append(args, "--state-file", sf, "--json"), strings.NewReader(""), &out, &errOut)
		var doc map[string]any
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatalf("aot %s: exit %d, no JSON document: %s%s", args[0], code, out.String(), errOut.String())
		}
		return code, doc
	}

	if code, doc := aot("pause", "--reason", "from the command line"); code != 0 || doc["paused"] != true {
		t.Fatalf("aot pause: %d %v", code, doc)
	}
	if s := h.loop(id); s.Status != "paused" || !s.Engine.Paused {
		t.Errorf("the API after aot pause: %+v", s)
	}
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+id+"/resume", map[string]any{}, &out); code != 200 {
		t.Fatalf("the API's resume of the loop aot pause paused: %d %v", code, out)
	}
	if code, doc := aot("resume"); code != 1 || doc["code"] != "not_paused" {
		t.Errorf("aot resume after the API's resume: %d %v, want exit 1 with code not_paused", code, doc)
	}
	if code := h.do("POST", "/api/loops/"+id+"/pause", map[string]any{"reason": "from the API"}, &out); code != 200 {
		t.Fatalf("the API's pause: %d %v", code, out)
	}
	if code, doc := aot("status"); code != 0 || doc["paused"] == nil {
		t.Errorf("aot status after the API's pause: %d %v", code, doc)
	}
	if code, doc := aot("stop", "--reason", "from the command line"); code != 0 || doc["engine_pid"] == nil {
		t.Fatalf("aot stop: %d %v", code, doc)
	}
	if s := h.loop(id); s.Engine.Running {
		t.Errorf("the API after aot stop: %+v", s)
	}
	if code := h.do("POST", "/api/loops/"+id+"/resume", map[string]any{}, &out); code != 409 {
		t.Errorf("the API's resume of the loop aot stop stopped: %d %v, want 409", code, out)
	}

	// One engine took them all, in order.
	data, err := os.ReadFile(journal.PathFor(sf))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(data), "\n") {
		var ev struct{ Type, Reason string }
		if json.Unmarshal([]byte(line), &ev) == nil && (ev.Type == "pause" || ev.Type == "resume") {
			got = append(got, ev.Type+" "+ev.Reason)
		}
	}
	want := "pause from the command line|resume resumed from aot serve|pause from the API"
	if strings.Join(got, "|") != want {
		t.Errorf("the journal's pauses and resumes:\n%s\nwant:\n%s", strings.Join(got, "|"), want)
	}
	os.WriteFile(filepath.Join(h.ws, "release"), nil, 0o644)
}
