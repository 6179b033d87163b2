package hooks

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Main is the whole of `aot-hook CLIENT EVENT`, the hook entry point that
// starts faster than aot itself (it links only this package and the state
// contract below it, none of the agent backends): the same answers as
// `aot hook CLIENT EVENT`, the state file named by AOT_STATE_FILE or found
// from the hook's cwd. argv is the whole command line (os.Args), the
// program's name first. It returns the exit code: 0 always, but 2 for a
// wrong CLIENT or EVENT; an error gives no decision and a line on stderr.
func Main(argv []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, getwd func() (string, error)) int {
	if token := getenv(GuardEnv); token != "" {
		return RunGuard(stdin, token)
	}
	args := argv[min(1, len(argv)):]
	if len(args) != 2 || !validEvent(Client(args[0]), Event(args[1])) {
		fmt.Fprintln(stderr, "usage: aot-hook CLIENT EVENT (claude stop|subagent-stop|pre-tool-use, codex stop|pre-tool-use, gemini after-agent|before-tool); the hook's JSON on stdin")
		return 2
	}
	c, ev := Client(args[0]), Event(args[1])
	in, err := ParseInput(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "aot-hook: %s; no decision\n", err)
		return 0
	}
	d, err := Answer(context.Background(), Options{Client: c, Event: ev, StateFile: getenv("AOT_STATE_FILE"), Getenv: getenv, Getwd: getwd}, in, argv)
	if err != nil {
		fmt.Fprintf(stderr, "aot-hook: %s; no decision\n", strings.TrimSpace(err.Error()))
		if d.Action == Allow {
			return 0
		}
	}
	if out := Render(c, ev, d); out != nil {
		_, _ = stdout.Write(out)
	}
	return 0
}
