package server_test

import (
	"os"
	"strings"
	"testing"
)

// A start the loop refuses at once answers with the cause, a 400 for a
// request aot run cannot start (an unknown agent, a CLI not on PATH): the
// error line, not the help below it nor the end of its output. The state
// file is left as it was.
func TestStartRefusedSaysWhy(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no claude here; aot run is this test binary, by its path
	h := start(t, "")
	id := h.create("A")
	stateFile := h.loop(id).StateFile
	before, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	h.refused("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "claude"}, 400,
		"aot run ended at once: cannot start: claude (for the roles probe, worker, verifier, judge, planner) is not found on PATH; install Claude Code")
	h.refused("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "nope"}, 400, `unknown agent "nope" (available: `)
	var doc struct{ Error string }
	h.do("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "nope"}, &doc)
	if strings.Contains(doc.Error, "Usage:") || strings.Contains(doc.Error, "Flags:") {
		t.Errorf("an unknown agent: %q, want its one error line without the help", doc.Error)
	}
	after, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("the state file changed:\n%s", after)
	}
}
