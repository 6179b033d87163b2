package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCommands measures whole commands in process (no process start),
// on a 1,000-atom state file made by bench/gen.
func BenchmarkCommands(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "src.md")
	gen := exec.Command("go", "run", "../../bench/gen", "-atoms", benchAtoms(), "-o", src)
	gen.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := gen.CombinedOutput(); err != nil {
		b.Fatalf("gen: %v\n%s", err, out)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, args := range [][]string{
		{"state", "--json"},
		{"validate", "--json"},
		{"atom", "set", "A" + benchAtoms(), "in_progress"},
		{"bind", "A1", "--summary", "S", "--artifacts", "a,b"},
	} {
		b.Run(args[0], func(b *testing.B) {
			path := filepath.Join(dir, "state.md")
			for b.Loop() {
				b.StopTimer()
				if err := os.WriteFile(path, data, 0o644); err != nil {
					b.Fatal(err)
				}
				var out bytes.Buffer
				d := &deps{io: &streams{Out: &out, ErrOut: &out}, getenv: func(string) string { return "" }, now: time.Now}
				b.StartTimer()
				if code := run(context.Background(), d, append(append([]string{}, args...), "--state-file", path)); code != 0 {
					b.Fatalf("exit %d: %s", code, out.String())
				}
			}
		})
	}
}

// benchAtoms is the size of the benchmark's state file: AOT_BENCH_ATOMS, else 1,000.
func benchAtoms() string {
	if n := os.Getenv("AOT_BENCH_ATOMS"); n != "" {
		return n
	}
	return "1000"
}
