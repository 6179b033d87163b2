package state

// Benchmarks of the state file at 10 to 100,000 atoms. Run them with
//
//	GOTOOLCHAIN=local go test -run='^$' -bench=. -benchmem ./internal/state/
//
// docs/PERFORMANCE.md records the numbers and the targets. bench/gen writes
// files of the same shape for the whole-process timings of bench/cli.sh.

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

var benchSizes = []int{10, 1_000, 10_000, 100_000}

// benchState builds a state of n atoms shaped like a long run: a layered DAG
// (each atom depends on one to three atoms of the layer before it), the
// first half resolved with a binding each, three in progress, the rest
// pending. bench/gen builds the same shape.
func benchState(n int) *State {
	width := 1
	for width*width < n {
		width++
	}
	atoms := make([]Atom, n)
	var bindings []Binding
	for i := range atoms {
		id := "A" + strconv.Itoa(i+1)
		a := Atom{ID: id, Description: "Implement part " + strconv.Itoa(i+1) + " of the export feature", Status: StatusPending, DependsOn: []string{}}
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
			a.Status = StatusResolved
			bindings = append(bindings, Binding{AtomID: id, Summary: "Part " + strconv.Itoa(i+1) + " done; tests added and passing",
				Artifacts: []string{"internal/export/part" + strconv.Itoa(i+1) + ".go", "internal/export/part" + strconv.Itoa(i+1) + "_test.go"}})
		case i < n/2+3:
			a.Status = StatusInProgress
		}
		atoms[i] = a
	}
	obj := Objective{
		Goal:             "Export every record as CSV and JSON",
		BaseCase:         &BaseCase{Legacy: &Check{Type: CheckCommand, Value: "go test ./..."}},
		BackgroundIntent: "Users want their data out",
		Deliverables:     "aot export command",
		DefinitionOfDone: "All export tests pass",
	}
	s := New(obj, atoms, "Export my data.")
	s.Control.Status = ControlRunning
	s.Control.Iteration = 5
	s.Control.PrevPendingCount = n - n/2
	s.Bindings = bindings
	return s
}

var benchFiles sync.Map // atom count -> []byte

func benchFile(b *testing.B, n int) []byte {
	if v, ok := benchFiles.Load(n); ok {
		return v.([]byte)
	}
	data := Marshal(benchState(n))
	if s, err := Parse(data); err != nil || !Validate(s).Valid() {
		b.Fatalf("generated file of %d atoms: %v %v", n, err, Validate(s).Errors)
	}
	benchFiles.Store(n, data)
	return data
}

func forSizes(b *testing.B, fn func(b *testing.B, n int, data []byte)) {
	for _, n := range benchSizes {
		b.Run("atoms="+strconv.Itoa(n), func(b *testing.B) {
			data := benchFile(b, n)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			fn(b, n, data)
		})
	}
}

func BenchmarkParse(b *testing.B) {
	forSizes(b, func(b *testing.B, n int, data []byte) {
		for b.Loop() {
			if _, err := Parse(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkParseLibrary reads the same frontmatter with the YAML library,
// the path a hand-edited file outside the fast layout takes.
func BenchmarkParseLibrary(b *testing.B) {
	forSizes(b, func(b *testing.B, n int, data []byte) {
		s, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		fm := s.doc.fm
		for b.Loop() {
			t, root, err := libraryTree(fm, 2)
			if err != nil {
				b.Fatal(err)
			}
			d := &decoder{t: t}
			d.decode(root)
		}
	})
}

func BenchmarkMarshalOneStatusChange(b *testing.B) {
	forSizes(b, func(b *testing.B, n int, data []byte) {
		s, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		s.Atoms[n-1].Status = StatusInProgress
		for b.Loop() {
			Marshal(s)
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	forSizes(b, func(b *testing.B, n int, data []byte) {
		s, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if r := Validate(s); !r.Valid() {
				b.Fatal(r.Errors)
			}
		}
	})
}

// BenchmarkUpdate is one whole Store.Update: lock, read, parse, validate
// before and after, one status change, write to a temp file, fsync, rename.
func BenchmarkUpdate(b *testing.B) {
	forSizes(b, func(b *testing.B, n int, data []byte) {
		path := filepath.Join(b.TempDir(), "state.md")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		st := NewStore(path)
		id := "A" + strconv.Itoa(n)
		for b.Loop() {
			_, err := st.Update(func(s *State) error {
				a := s.Atom(id)
				if a.Status == StatusPending {
					a.Status = StatusInProgress
				} else {
					a.Status = StatusPending
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkParseQuick is the hooks' reader (quick.go) on the same files.
func BenchmarkParseQuick(b *testing.B) {
	forSizes(b, func(b *testing.B, n int, data []byte) {
		for b.Loop() {
			if _, q, _, _, err := parseQuick(data); err != nil || q == nil {
				b.Fatal(err, q)
			}
		}
	})
}

// BenchmarkUpdateControl is one Store.UpdateControl of the hooks' kind: lock,
// read, validate, the iteration counted, written through temp file, fsync
// and rename; beside BenchmarkUpdate.
func BenchmarkUpdateControl(b *testing.B) {
	forSizes(b, func(b *testing.B, n int, data []byte) {
		path := filepath.Join(b.TempDir(), "state.md")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		st := NewStore(path).RefuseInvalid()
		for b.Loop() {
			if _, err := st.UpdateControl(func(s *State) error { s.Control.Iteration++; return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestBenchStateIsValid keeps the benchmark input honest.
func TestBenchStateIsValid(t *testing.T) {
	for _, n := range []int{1, 10, 1000} {
		s, err := Parse(Marshal(benchState(n)))
		if err != nil {
			t.Fatal(err)
		}
		if r := Validate(s); !r.Valid() || len(r.Warnings) > 0 {
			t.Errorf("%d atoms: %v %v", n, r.Errors, r.Warnings)
		}
		if len(s.Atoms) != n || len(s.Bindings) != n/2 {
			t.Errorf("%d atoms: got %d atoms, %d bindings", n, len(s.Atoms), len(s.Bindings))
		}
	}
}
