package graphview

// Benchmarks of aot graph at 10,000 atoms, beside the baseline of parsing
// the same state file (what every aot command pays first). Run them with
//
//	GOTOOLCHAIN=local go test -run='^$' -bench=. -benchmem ./internal/graphview/
//
// docs/PERFORMANCE.md ("Graph export") records the figures.

import (
	"io"
	"testing"

	"github.com/aot-loop/aot/internal/state"
)

func BenchmarkGraph10000(b *testing.B) {
	s := layered(10_000)
	data := state.Marshal(s)
	parsed, err := state.Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	if r := state.Validate(parsed); !r.Valid() {
		b.Fatalf("the generated state does not validate: %v", r.Errors[:min(3, len(r.Errors))])
	}
	b.Logf("%d atoms, %d OR groups, %d decompositions, %d bytes", len(s.Atoms), len(s.ORGroups), len(s.Decompositions), len(data))
	b.Run("baseline=parse", func(b *testing.B) {
		for b.Loop() {
			if _, err := state.Parse(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			Build(parsed, Options{})
		}
	})
	for name, f := range map[string]func(io.Writer, *Graph) error{"mermaid": Mermaid, "dot": DOT, "svg": SVG} {
		b.Run("build+"+name, func(b *testing.B) {
			for b.Loop() {
				if err := f(io.Discard, Build(parsed, Options{})); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Every atom laid out, for the dashboard's zoomed-out view.
	b.Run("build-uncapped", func(b *testing.B) {
		for b.Loop() {
			Build(parsed, Options{MaxNodes: -1})
		}
	})
}
