//go:build temporal

package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Bad flags of aot codec-server and aot worker's --log-level are usage
// errors that name the flag; nothing is served or dialled.
func TestWatchFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"codec-server", "--addr", "8081"}, `--addr "8081"`},
		{[]string{"codec-server", "--ui-origin", "localhost:8233"}, `--ui-origin "localhost:8233": an origin is a scheme and a host`},
		{[]string{"codec-server", "--ui-origin", "http://localhost:8233/ui"}, `--ui-origin "http://localhost:8233/ui"`},
		{[]string{"worker", "--log-level", "loud"}, `--log-level: log level "loud": choose from debug, info, warn, error`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if code := Main(c.args, strings.NewReader(""), &out, &out); code != 2 || !strings.Contains(out.String(), c.want) {
				t.Errorf("exit %d, want 2 and %q:\n%s", code, c.want, out.String())
			}
		})
	}
	// AOT_LOG_LEVEL is checked as the flag is.
	t.Setenv(envLogLevel, "chatty")
	var out bytes.Buffer
	if code := Main([]string{"worker"}, strings.NewReader(""), &out, &out); code != 2 || !strings.Contains(out.String(), `AOT_LOG_LEVEL: log level "chatty"`) {
		t.Errorf("AOT_LOG_LEVEL=chatty: exit %d\n%s", code, out.String())
	}
}
