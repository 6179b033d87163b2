// Command aot-hook answers Claude Code, Codex and Gemini CLI hooks exactly as
// `aot hook CLIENT EVENT` does, from a binary that starts in a fraction of
// aot's time: hooks run on every tool call. aot plugin install uses it when
// it is on PATH.
package main

import (
	"os"

	"github.com/aot-loop/aot/internal/hooks"
)

func main() {
	os.Exit(hooks.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv, os.Getwd))
}
