// Command aot-hook answers Claude Code, Codex and Gemini CLI hooks exactly as
// `aot hook CLIENT EVENT` does, from a binary that starts in a fraction of
// aot's time: hooks run on every tool call. aot plugin install uses it when
// it is on PATH.
package main

import (
	"os"
	"runtime/debug"

	"github.com/aot-loop/aot/internal/hooks"
	"github.com/aot-loop/aot/internal/state"
)

func main() {
	tuneGC()
	os.Exit(hooks.Main(os.Args, os.Stdin, os.Stdout, os.Stderr, os.Getenv, os.Getwd))
}

// tuneGC turns the collector off, as aot does for its state commands: a
// hook reads one state file and exits, within a soft memory limit of 14x
// the file (at least 48 MB). GOGC or GOMEMLIMIT in the environment win.
func tuneGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	path := os.Getenv("AOT_STATE_FILE")
	if path == "" {
		if wd, err := os.Getwd(); err == nil {
			path, _ = state.Find(wd)
		}
	}
	limit := int64(48 << 20)
	if fi, err := os.Stat(path); err == nil && 14*fi.Size() > limit {
		limit = 14 * fi.Size()
	}
	debug.SetMemoryLimit(limit)
	debug.SetGCPercent(-1)
}
