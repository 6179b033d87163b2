package runlock

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// stateFile makes a state file (its content does not matter here).
func stateFile(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("---\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAcquireHolderRelease(t *testing.T) {
	sf := filepath.Join(t.TempDir(), ".claude", "aot-loop-state.md")
	if _, held, err := Holder(sf); held || err != nil {
		t.Fatalf("Holder before any state file = held %v, %v; want free", held, err)
	}
	stateFile(t, sf)
	if _, held, err := Holder(sf); held || err != nil {
		t.Fatalf("Holder before any engine = held %v, %v; want free", held, err)
	}
	l, err := Acquire(sf)
	if err != nil {
		t.Fatal(err)
	}
	pid, held, err := Holder(sf)
	if err != nil || !held || pid != os.Getpid() {
		t.Fatalf("Holder = %d, %v, %v; want this process", pid, held, err)
	}
	if _, err := Acquire(sf); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Acquire = %v; want ErrRunning", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := Holder(sf); held {
		t.Fatal("lock still held after Release")
	}
	l2, err := Acquire(sf)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	_ = l2.Release()
}

// What aot keeps beside the state file is kept from other users.
func TestAcquireModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	sf := stateFile(t, filepath.Join(t.TempDir(), "state.md"))
	l, err := Acquire(sf)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	for path, want := range map[string]os.FileMode{
		journal.DirFor(sf):   journal.DirMode,
		PathFor(sf):          journal.FileMode,
		PathFor(sf) + ".pid": journal.FileMode,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
}

// Acquire creates the aot-loop folder only beside a state file that is
// there and regular: not beside a missing file, not beside a directory.
func TestAcquireRefusesWhatIsNotAStateFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.md")
	if _, err := Acquire(missing); !errors.Is(err, state.ErrNotExist) {
		t.Errorf("Acquire(missing) = %v; want state.ErrNotExist", err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(sub); !errors.Is(err, state.ErrNotRegular) {
		t.Errorf("Acquire(directory) = %v; want state.ErrNotRegular", err)
	}
	for _, d := range []string{dir, sub} {
		if _, err := os.Stat(filepath.Join(d, journal.Dir)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("an aot-loop folder was made in %s: %v", d, err)
		}
	}
}

// Locks follow the real file, not the link: two symbolic links to one state
// file give one run lock, and the journal and aot-loop folder are the real
// file's.
func TestOneLockThroughTwoSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := stateFile(t, filepath.Join(dir, "real", ".claude", "aot-loop-state.md"))
	a := filepath.Join(dir, "one", "a.md")
	b := filepath.Join(dir, "two", "b.md")
	for _, l := range []string{a, b} {
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(real, a); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	rel, _ := filepath.Rel(filepath.Dir(b), real)
	if err := os.Symlink(rel, b); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := Acquire(b); !errors.Is(err, ErrRunning) {
		t.Fatalf("Acquire through the second link = %v; want ErrRunning", err)
	}
	if pid, held, err := Holder(b); err != nil || !held || pid != os.Getpid() {
		t.Fatalf("Holder through the second link = %d, %v, %v; want this process", pid, held, err)
	}
	realDir, err := filepath.EvalSymlinks(filepath.Dir(real))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(realDir, journal.Dir)
	for _, sf := range []string{a, b, real} {
		if got := journal.DirFor(sf); got != want {
			t.Errorf("journal.DirFor(%s) = %s; want %s", sf, got, want)
		}
		if got := journal.PathFor(sf); got != filepath.Join(want, journal.FileName) {
			t.Errorf("journal.PathFor(%s) = %s", sf, got)
		}
		if got := PathFor(sf); got != filepath.Join(want, "run.lock") {
			t.Errorf("PathFor(%s) = %s", sf, got)
		}
	}
	for _, l := range []string{a, b} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(l), journal.Dir)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("an aot-loop folder beside the link %s: %v", l, err)
		}
	}
}
