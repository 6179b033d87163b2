//go:build temporal && linux

package cli

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/state"
)

// jsonDoc is the JSON document in a command's output (its stderr lines,
// if any, come first).
func jsonDoc(t *testing.T, name string, out *lockedBuffer) map[string]any {
	t.Helper()
	s := out.String()
	var doc map[string]any
	if i := strings.Index(s, "{"); i < 0 || json.Unmarshal([]byte(s[i:]), &doc) != nil {
		t.Fatalf("%s printed no JSON document:\n%s", name, s)
	}
	return doc
}

// Plain aot (no Temporal SDK) steers a loop on Temporal through the typed
// hand-over to aot-temporal, from both faces: its commands and its server
// reach the one controller, and through it the same workflow, which a real
// worker runs on a real dev server.
func TestPlainAotSteersALoopOnTemporalFromEveryFace(t *testing.T) {
	start := aotProcessesOf(t, plainAot(t))
	root, _, ws, sf := temporalProject(t, "one file", "test -f A.txt", 1, state.Atom{ID: "A", Description: "write A.txt"})
	ran, gate := filepath.Join(root, "ran.log"), filepath.Join(root, "gate")
	const queue = "faces"
	_, wOut := start("worker", ws, "worker", "--task-queue", queue, "--cache", filepath.Join(root, "cache"), "--identity", "w1", "--grace", "1s",
		"--agent-command", slowAgent(ran, gate))
	until(t, "the worker polls", 60*time.Second, func() bool { return strings.Contains(wOut.String(), "polling task queue "+queue) })
	run, runOut := start("aot run", ws, "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec", "--agent-command", slowAgent(ran, gate))
	until(t, "the agent runs", 90*time.Second, func() bool { return len(ranLines(ran)) == 1 })

	// cmd runs plain aot args to its end and returns its exit code and
	// output.
	cmd := func(args ...string) (int, *lockedBuffer) {
		t.Helper()
		c, out := start("aot "+args[0], ws, args...)
		return exitOf(t, "aot "+args[0], c, out, 60*time.Second), out
	}
	workflow := func() map[string]any {
		t.Helper()
		code, out := cmd("status", "--json")
		doc := jsonDoc(t, "aot status --json", out)
		wf, _ := doc["workflow"].(map[string]any)
		if code != 0 || wf == nil {
			t.Fatalf("aot status --json: exit %d, no workflow:\n%s", code, out)
		}
		return wf
	}

	// The commands' face.
	if code, out := cmd("pause", "--reason", "a look", "--json"); code != 0 || jsonDoc(t, "aot pause", out)["paused"] != true {
		t.Fatalf("aot pause: exit %d\n%s", code, out)
	}
	if wf := workflow(); wf["paused"] != true || !strings.HasPrefix(wf["workflow_id"].(string), "aot-") {
		t.Errorf("after aot pause the workflow says %v", wf)
	}
	if code, out := cmd("resume", "--json"); code != 0 || jsonDoc(t, "aot resume", out)["paused"] != false {
		t.Fatalf("aot resume: exit %d\n%s", code, out)
	}
	if code, out := cmd("resume", "--json"); code != 1 || jsonDoc(t, "aot resume again", out)["code"] != "not_paused" {
		t.Errorf("aot resume of a workflow that is not paused: exit %d, want 1 with code not_paused\n%s", code, out)
	}
	if code, out := cmd("redirect", "--reason", "no such atom", "--remove-atom", "NOPE", "--json"); code != 1 || jsonDoc(t, "aot redirect", out)["code"] != "refused" {
		t.Errorf("a redirect the workflow refuses: exit %d, want 1 with code refused\n%s", code, out)
	}
	code, out := cmd("redirect", "--reason", "more rounds", "--max-iterations", "30", "--json")
	if doc := jsonDoc(t, "aot redirect", out); code != 0 || doc["applied_by"] != "engine" || strings.Join(strs(doc["corrections"]), ",") != "constraint_change" {
		t.Errorf("aot redirect: exit %d\n%s", code, out)
	}
	if s, err := state.NewStore(sf).Read(); err != nil || s.Objective.Constraints.MaxIterations != 30 {
		t.Errorf("the redirect did not reach the state file through the workflow: %v", err)
	}

	// The server's face, plain aot serve: the same workflow, paused
	// through the API, is paused for aot status.
	_, sOut := start("aot serve", ws, "serve", "--addr", "127.0.0.1:0", "--workspace", ws, "--token-file", filepath.Join(root, "token"), "--json")
	var served struct{ URL string }
	until(t, "aot serve prints its URL", 30*time.Second, func() bool {
		s := sOut.String()
		i := strings.Index(s, "{")
		return i >= 0 && json.Unmarshal([]byte(s[i:]), &served) == nil && served.URL != ""
	})
	u, err := url.Parse(served.URL)
	if err != nil {
		t.Fatal(err)
	}
	api := apiOf(t, "http://"+u.Host, u.Query().Get("token"))
	_, list := api("GET", "/api/loops", nil)
	loops, _ := list["loops"].([]any)
	if len(loops) != 1 {
		t.Fatalf("loops: %v", list)
	}
	id := loops[0].(map[string]any)["loop_id"].(string)
	if code, doc := api("POST", "/api/loops/"+id+"/pause", map[string]any{"reason": "from the API"}); code != 200 || doc["paused"] != true {
		t.Fatalf("pause through the API: %d %v", code, doc)
	}
	if wf := workflow(); wf["paused"] != true {
		t.Errorf("after the API's pause aot status says %v", wf)
	}
	if code, doc := api("POST", "/api/loops/"+id+"/redirect", map[string]any{"reason": "no such atom", "remove_atoms": []string{"NOPE"}}); code != 422 {
		t.Errorf("a redirect the workflow refuses, through the API: %d %v, want 422", code, doc)
	}

	// aot stop: the workflow closes, and aot run ends with it.
	code, out = cmd("stop", "--reason", "enough")
	if code != 0 || !strings.Contains(out.String(), "the workflow has closed (manual_stop)") {
		t.Errorf("aot stop: exit %d\n%s", code, out)
	}
	if s, err := state.NewStore(sf).Read(); err != nil || s.Control.Status != state.ControlStopped {
		t.Errorf("after aot stop the state file says %v %v", s.Control.Status, err)
	}
	if code := exitOf(t, "aot run", run, runOut, 60*time.Second); code == 0 || !strings.Contains(runOut.String(), "stopped (manual_stop)") {
		t.Errorf("aot run after the stop: exit %d\n%s", code, runOut)
	}
	os.WriteFile(gate, nil, 0o644)
}

// strs is a JSON array of strings.
func strs(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, s := range list {
		out = append(out, s.(string))
	}
	return out
}
