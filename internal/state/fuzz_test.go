package state

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks the promises the rest of aot builds on: Parse never
// panics; the quick reader reads every file as Parse does; where the fast scanner reads a file, the YAML library reads it the
// same; an unchanged state is written back byte for byte; and after a
// one-field change Marshal writes a file that parses, and that reads as the
// changed state whenever the original read was free of contract errors.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/*.md", "testdata/tricky/*.md"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range files {
			data, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(miniState))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkQuick(t, data) // the hooks' reader reads it as Parse does
		s, err := Parse(data)
		if err != nil {
			return
		}
		if _, err := compareReaders(data); err != nil {
			t.Fatal(err)
		}
		_ = Validate(s)
		if out := Marshal(s); !bytes.Equal(out, data) {
			t.Fatalf("Marshal of an unchanged state altered the file:\n%s", cmp.Diff(string(data), string(out)))
		}
		want := s.clone()
		switch {
		case len(s.Atoms) > 0:
			a := &s.Atoms[len(s.Atoms)-1]
			a.Status = map[bool]string{true: StatusPending, false: StatusInProgress}[a.Status == StatusInProgress]
			want.Atoms[len(want.Atoms)-1].Status = a.Status
		default:
			s.Control.Iteration++
			want.Control.Iteration++
		}
		out := Marshal(s)
		got, err := Parse(out)
		if err != nil {
			t.Fatalf("Marshal wrote a file Parse refuses: %v\n%s", err, out)
		}
		// A file the decoder could not represent (base_case: 0) is written
		// as the decoded state says, so only a faithful read must come back
		// equal; every written file must still parse.
		if errs, _ := s.readIssues(); len(errs) == 0 && !Equal(want, got) {
			t.Fatalf("the written file reads differently (-want +got):\n%s\nfile:\n%s", diffStates(want, got), out)
		}
		if _, err := compareReaders(out); err != nil {
			t.Fatal(err)
		}
	})
}
