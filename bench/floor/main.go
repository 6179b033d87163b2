// Command floor is what bench/cli.sh measures aot against: with no
// argument it is a Go hello-world (the cost of starting a Go process); with
// a state file it reads the file and counts its atoms (the cost of reading
// it at all), printing the count.
package main

import (
	"bytes"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Println("hello, world")
		return
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(bytes.Count(data, []byte("\n  - id: ")))
}
