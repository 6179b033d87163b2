package journal

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The journal and its folder are kept from other users.
func TestOpenModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	path := PathFor(filepath.Join(t.TempDir(), "state.md"))
	j, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for p, want := range map[string]os.FileMode{filepath.Dir(path): DirMode, path: FileMode} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}
