//go:build temporal

package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aot-loop/aot/internal/temporaltest"
)

// aot doctor (aot-temporal) connects to the Temporal service the
// environment names, as aot worker would: a real dev server is ok, a port
// where nothing listens is an error with the fix.
func TestDoctorTemporalConnects(t *testing.T) {
	addr := temporaltest.DevServer(t)
	dir := t.TempDir()
	for _, tc := range []struct{ address, want string }{
		{addr, "ok       temporal: connected to " + addr + " (namespace default)\n"},
		{"127.0.0.1:1", "error    temporal: connect to Temporal at 127.0.0.1:1 (TEMPORAL_ADDRESS)"},
	} {
		t.Setenv("TEMPORAL_ADDRESS", tc.address)
		var out, errOut bytes.Buffer
		d := &deps{io: newStreams(nil, &out, &errOut, func(string) string { return "" }), getenv: func(k string) string {
			if k == "TEMPORAL_ADDRESS" {
				return tc.address
			}
			return ""
		}, getwd: func() (string, error) { return dir, nil }}
		run(t.Context(), d, []string{"doctor", "--agent-command", "true", "--state-file", dir + "/.claude/aot-loop-state.md"})
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("TEMPORAL_ADDRESS=%s: want %q in:\n%s%s", tc.address, tc.want, out.String(), errOut.String())
		}
	}
}
