package hooks

import (
	"bytes"
	"strings"
	"testing"
)

// aot-hook answers as aot hook does: usage errors exit 2, a decision is
// printed in the client's format, anything else is no decision and exit 0.
func TestMainAnswersLikeAotHook(t *testing.T) {
	dir, path := project(t, stateText)
	env := map[string]string{"AOT_STATE_FILE": path}
	getenv := func(k string) string { return env[k] }
	getwd := func() (string, error) { return dir, nil }
	run := func(args []string, in string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := Main(append([]string{"aot-hook"}, args...), strings.NewReader(in), &out, &errOut, getenv, getwd)
		return out.String(), errOut.String(), code
	}
	for _, args := range [][]string{nil, {"claude"}, {"claude", "after-agent"}, {"vim", "stop"}} {
		if _, e, code := run(args, "{}"); code != 2 || !strings.Contains(e, "usage: aot-hook CLIENT EVENT") {
			t.Errorf("%v: exit %d, stderr %q", args, code, e)
		}
	}
	// The owner's Stop names the next atom.
	own(t, path, Claude, "S1")
	out, e, code := run([]string{"claude", "stop"}, `{"session_id":"S1","hook_event_name":"Stop","stop_hook_active":false}`)
	if code != 0 || !strings.HasPrefix(out, `{"decision":"block"`) || !strings.Contains(out, "A1: Write the code") {
		t.Fatalf("owner's stop: exit %d, stdout %q, stderr %q", code, out, e)
	}
	// Another session: no decision.
	if out, _, code := run([]string{"claude", "stop"}, `{"session_id":"S2","hook_event_name":"Stop","stop_hook_active":false}`); code != 0 || out != "" {
		t.Fatalf("foreign session: exit %d, stdout %q", code, out)
	}
	// Garbage on stdin: no decision, said on stderr.
	if out, e, code := run([]string{"gemini", "after-agent"}, `not json`); code != 0 || out != "" || !strings.Contains(e, "no decision") {
		t.Fatalf("garbage: exit %d, stdout %q, stderr %q", code, out, e)
	}
}
