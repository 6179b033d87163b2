// Command aot runs AoT Loop: autonomous coding-agent loops that provably stop.
// All behaviour lives in internal/cli; this file only hands over the process.
package main

import (
	"os"

	"github.com/aot-loop/aot/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
