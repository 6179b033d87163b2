// Command gen writes a state file of a given number of atoms for the
// whole-process benchmarks of bench/cli.sh. The shape is the one of
// internal/state's benchmarks: a layered DAG (each atom depends on one to
// three atoms of the layer before it), the first half resolved with a
// binding each, three in progress, the rest pending.
//
//	go run ./bench/gen -atoms 100000 -o /tmp/state.md
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/aot-loop/aot/internal/state"
)

func main() {
	n := flag.Int("atoms", 1000, "number of atoms")
	out := flag.String("o", "", "output file (default stdout)")
	flag.Parse()
	if *n < 1 {
		fmt.Fprintln(os.Stderr, "gen: -atoms must be at least 1")
		os.Exit(2)
	}
	data := state.Marshal(build(*n))
	var err error
	if *out == "" {
		_, err = os.Stdout.Write(data)
	} else {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func build(n int) *state.State {
	width := 1
	for width*width < n {
		width++
	}
	atoms := make([]state.Atom, n)
	var bindings []state.Binding
	for i := range atoms {
		id := "A" + strconv.Itoa(i+1)
		a := state.Atom{ID: id, Description: "Implement part " + strconv.Itoa(i+1) + " of the export feature", Status: state.StatusPending, DependsOn: []string{}}
		if layer := i / width; layer > 0 {
			seen := map[string]bool{}
			for k := 0; k < 1+i%3; k++ {
				dep := "A" + strconv.Itoa((layer-1)*width+(i+k*7)%width+1)
				if !seen[dep] {
					seen[dep] = true
					a.DependsOn = append(a.DependsOn, dep)
				}
			}
		}
		switch {
		case i < n/2:
			a.Status = state.StatusResolved
			bindings = append(bindings, state.Binding{AtomID: id, Summary: "Part " + strconv.Itoa(i+1) + " done; tests added and passing",
				Artifacts: []string{"internal/export/part" + strconv.Itoa(i+1) + ".go", "internal/export/part" + strconv.Itoa(i+1) + "_test.go"}})
		case i < n/2+3:
			a.Status = state.StatusInProgress
		}
		atoms[i] = a
	}
	obj := state.Objective{
		Goal:             "Export every record as CSV and JSON",
		BaseCase:         &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "go test ./..."}},
		BackgroundIntent: "Users want their data out",
		Deliverables:     "aot export command",
		DefinitionOfDone: "All export tests pass",
	}
	s := state.New(obj, atoms, "Export my data.")
	s.Control.Status = state.ControlRunning
	s.Control.Iteration = 5
	s.Control.PrevPendingCount = n - n/2
	s.Bindings = bindings
	return s
}
