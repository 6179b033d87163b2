//go:build !linux

// Command outcome is the outcome benchmark; it needs Linux (process groups,
// /proc to find leftover processes).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "outcome: the outcome benchmark runs on Linux only")
	os.Exit(2)
}
