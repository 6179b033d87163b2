package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "state.md")
	if err := os.WriteFile(file, []byte(miniState), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckPath(file); err != nil {
		t.Errorf("CheckPath(regular file) = %v", err)
	}
	if err := CheckPath(filepath.Join(dir, "nope.md")); !errors.Is(err, ErrNotExist) {
		t.Errorf("CheckPath(missing) = %v; want ErrNotExist", err)
	}
	err := CheckPath(dir)
	var pe *PathError
	if !errors.As(err, &pe) || !errors.Is(err, ErrNotRegular) || pe.Kind != "a directory" {
		t.Fatalf("CheckPath(directory) = %v; want a *PathError for a directory", err)
	}
	if want := "state file " + dir + " is a directory, not a regular file"; err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
}

func TestCheckPathThroughSymlinks(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "state.md")
	if err := os.WriteFile(file, []byte(miniState), 0o644); err != nil {
		t.Fatal(err)
	}
	linkFile, linkDir := filepath.Join(dir, "lf.md"), filepath.Join(dir, "ld.md")
	if err := os.Symlink("state.md", linkFile); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	if err := os.Symlink(".", linkDir); err != nil {
		t.Fatal(err)
	}
	if err := CheckPath(linkFile); err != nil {
		t.Errorf("CheckPath(link to a regular file) = %v", err)
	}
	err := CheckPath(linkDir)
	var pe *PathError
	if !errors.As(err, &pe) || pe.Kind != "a directory" || pe.Target == "" {
		t.Fatalf("CheckPath(link to a directory) = %#v", err)
	}
	want := "state file " + linkDir + " is a symbolic link to " + pe.Target + ", which is a directory, not a regular file"
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
}

// A directory at the path: every store operation refuses it by name, and
// Create, with or without overwrite, leaves it alone.
func TestStoreRefusesADirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state.md")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st := NewStore(dir)
	_, rerr := st.Read()
	_, uerr := st.Update(func(*State) error { return nil })
	cerr := st.Create(mustParse(t, miniState), false)
	ferr := st.Create(mustParse(t, miniState), true)
	for i, err := range []error{rerr, uerr, cerr, ferr} {
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("operation %d = %v; want a *PathError", i, err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the directory was replaced: %v %v", fi, err)
	}
	if _, err := os.Stat(dir + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a lock file was made beside the directory: %v", err)
	}
}

func TestCreateReplacingSaysWhatItReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s", "state.md")
	st := NewStore(path)
	old, err := st.CreateReplacing(mustParse(t, miniState), false)
	if err != nil || old != nil {
		t.Fatalf("first create = %v, %v; want nothing replaced", old, err)
	}
	fi, _ := os.Stat(path)
	if _, err := st.CreateReplacing(mustParse(t, miniState), false); err == nil {
		t.Fatal("create over an existing file without overwrite succeeded")
	}
	old, err = st.CreateReplacing(mustParse(t, miniState), true)
	if err != nil || old == nil || old.Path != path || old.Size != fi.Size() {
		t.Fatalf("overwrite = %+v, %v; want %s of %d bytes", old, err, path, fi.Size())
	}
}

// Two symbolic links to one state file share one update lock: the lock
// file is the real file's.
func TestUpdateLockFollowsTheRealFile(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "state.md")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte(miniState), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md")
	if err := os.Symlink(real, a); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	if err := os.Symlink(filepath.Join("real", "state.md"), b); err != nil {
		t.Fatal(err)
	}
	unlock, err := NewStore(a).lock()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := NewStore(b).Update(func(s *State) error { s.Control.Iteration = 9; return nil })
		done <- err
	}()
	select {
	case err := <-done:
		unlock()
		t.Fatalf("an update through the second link ran while the first held the lock (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(real + ".lock"); err != nil {
		t.Errorf("no lock beside the real file: %v", err)
	}
	for _, l := range []string{a, b} {
		if _, err := os.Lstat(l + ".lock"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a lock file beside the link %s: %v", l, err)
		}
	}
}

func TestFindSearchesUpward(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, ok := Find(deep); ok {
		t.Fatalf("Find in an empty tree = %q; want none", p)
	}
	// A .claude folder without a state file is not a match (Claude Code
	// keeps its settings there): the search goes on.
	if err := os.MkdirAll(filepath.Join(root, "a", "b", ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "a", DefaultPath)
	if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, []byte(miniState), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, ok := Find(deep); !ok || p != want {
		t.Errorf("Find = %q, %v; want %q", p, ok, want)
	}
	if p, ok := Find(filepath.Join(root, "a")); !ok || p != want {
		t.Errorf("Find in the project itself = %q, %v; want %q", p, ok, want)
	}
}

func TestReadRefusesAFileOverTheLimitFromItsSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.md")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file: 300 MB on paper, nothing on disk; reading it whole would
	// take seconds and the memory of 300 MB.
	if err := f.Truncate(300 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	_, err = NewStore(path).Read()
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("Read = %v; want a *TooLargeError", err)
	}
	if want := "state file " + path + " is 300 MiB, more than the 64 MiB a state file may hold; check the path"; err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing took %s: the file was read", d)
	}
	if _, err := NewStore(path).Update(func(*State) error { return nil }); !errors.As(err, &tl) {
		t.Errorf("Update = %v; want a *TooLargeError", err)
	}
}

func TestRefuseInvalidLeavesTheFileAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.md")
	src := strings.Replace(miniState, "  iteration: 1\n", "  iteration: HOME[$(touch x)]\n\n", 1)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewStore(path).RefuseInvalid().Update(func(s *State) error {
		s.Control.Status = ControlStopped
		return nil
	})
	var ie *InvalidFileError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "control.iteration: must be an integer") {
		t.Fatalf("Update = %v; want an *InvalidFileError naming control.iteration", err)
	}
	if got, _ := os.ReadFile(path); string(got) != src {
		t.Errorf("the file changed:\n%s", got)
	}
}

func TestProjectRoot(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"/p/.claude/aot-loop-state.md", "/p"},
		{"/p/.claude/aot-loops/loop-v2-20261123-abc123/aot-loop-state.md", "/p"},
		{"/p/sub/state.md", "/p/sub"},
		{"/state.md", "/"},
	} {
		if got := ProjectRoot(tc.file); got != tc.want {
			t.Errorf("ProjectRoot(%q) = %q, want %q", tc.file, got, tc.want)
		}
	}
}
