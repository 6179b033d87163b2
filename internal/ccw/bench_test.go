package ccw

import "testing"

// BenchmarkBuildWrite is the view of a loop of 1,000 atoms and 10,000
// journal events built and written again after one more event: the cost
// of keeping it in step with a growing journal.
func BenchmarkBuildWrite(b *testing.B) {
	m, s, evs := bigFixture(1000)
	if len(evs) < 10000 {
		b.Fatalf("%d events", len(evs))
	}
	dir := b.TempDir()
	if err := Write(dir, Build(m, s, evs[:len(evs)-1], false), evs[:len(evs)-1]); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := len(evs) - 1 + i%2 // the journal grows, or a new journal shrinks it
		if err := Write(dir, Build(m, s, evs[:n], false), evs[:n]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuild is the mapping alone.
func BenchmarkBuild(b *testing.B) {
	m, s, evs := bigFixture(1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = Build(m, s, evs, false)
	}
}
