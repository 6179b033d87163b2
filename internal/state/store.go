package state

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gofrs/flock"
)

// DefaultPath is where the state file lives, relative to the project.
const DefaultPath = ".claude/aot-loop-state.md"

// ErrNotExist is returned when the state file does not exist.
var ErrNotExist = errors.New("state file not found")

// ValidationError is a change refused because it breaks the contract.
type ValidationError struct {
	File   string
	Issues []Issue
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		parts[i] = is.String()
	}
	return fmt.Sprintf("%s: change refused: %s", e.File, strings.Join(parts, "; "))
}

// Store reads and changes one state file. Every change goes through Update.
type Store struct {
	path string
	// guard, when set, is asked right before an update's new file replaces
	// the old one; an error aborts the update (the file is left as it is).
	// The loop engine uses it to notice a file changed behind its back in
	// the moment of its own write.
	guard func() error
	// written is the file the last write of this store put in place, as
	// it was when it replaced the old one.
	written fs.FileInfo
	// refuseInvalid makes Update refuse a file that does not validate as it
	// was read (see RefuseInvalid).
	refuseInvalid bool
}

// RefuseInvalid makes the store's updates refuse a file that does not
// validate as read (an *InvalidFileError), leaving it byte-identical, instead
// of accepting changes that add no new error. A person's commands use it: a
// change written over an invalid file would rewrite what could not be read
// (a value that is not a number becomes 0); the file must be repaired by hand
// first. It returns st.
func (st *Store) RefuseInvalid() *Store {
	st.refuseInvalid = true
	return st
}

// InvalidFileError is an update refused because the file, as it was read,
// does not validate.
type InvalidFileError struct {
	File   string
	Issues []Issue // the file's errors, in validation order
}

func (e *InvalidFileError) Error() string {
	more := ""
	if n := len(e.Issues) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Sprintf("%s does not validate, so it is left unchanged: %s%s; repair it by hand first (aot validate lists every error with its line)", e.File, e.Issues[0], more)
}

// Written returns the file this store last wrote, as it was when it was put
// in place (nil before any write): comparing it with a later os.Stat tells
// whether someone else has changed the file since, even one who changed it
// right after the write.
func (st *Store) Written() fs.FileInfo { return st.written }

// Guard sets a check run right before Update or UpdateBatch replaces the
// file (after the new content is written and synced, so the window between
// the check and the replacement is as small as a rename).
func (st *Store) Guard(fn func() error) { st.guard = fn }

// NewStore returns the store of the state file at path.
func NewStore(path string) *Store { return &Store{path: path} }

// Path is the state file's path.
func (st *Store) Path() string { return st.path }

// Read returns the current state. It takes no lock: writes replace the file
// atomically, so a reader sees either the old or the new file. A path that
// is not a regular file is refused (a *PathError) without being opened.
func (st *Store) Read() (*State, error) {
	data, err := st.read()
	if err != nil {
		return nil, err
	}
	return st.parse(data)
}

// read returns the file's bytes, refusing a path that is not a regular file.
func (st *Store) read() ([]byte, error) {
	if err := CheckPath(st.path); err != nil {
		return nil, err
	}
	data, err := readRegular(st.path)
	if err != nil {
		return nil, st.readError(err)
	}
	return data, nil
}

func (st *Store) readError(err error) error {
	var pe *PathError
	var tl *TooLargeError
	if errors.As(err, &pe) || errors.As(err, &tl) {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotExist, st.path)
	}
	return fmt.Errorf("read state file: %w", err)
}

func (st *Store) parse(data []byte) (*State, error) {
	s, err := Parse(data)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.File = st.path
		}
		return nil, err
	}
	return s, nil
}

// Update applies fn to the state under a cross-process lock: it re-reads the
// file inside the lock, applies fn, refuses the change if it adds contract
// errors or makes an illegal status transition, and replaces the file
// atomically. When fn fails or the change is refused, the file is left
// byte-identical. It returns the state as written.
func (st *Store) Update(fn func(*State) error) (*State, error) {
	return st.update(fn, true)
}

// UpdateBatch is Update without the status-transition check: for the loop
// engine, which makes each transition itself through the work-graph rules
// and writes several of them at once (pending -> in_progress -> resolved in
// memory reads as pending -> resolved in the file). Contract errors are
// still refused.
func (st *Store) UpdateBatch(fn func(*State) error) (*State, error) {
	return st.update(fn, false)
}

func (st *Store) update(fn func(*State) error, checkTransitions bool) (*State, error) {
	data, unlock, err := st.lockedRead()
	if err != nil {
		return nil, err
	}
	defer unlock()
	s, err := st.parse(data)
	if err != nil {
		return nil, err
	}
	valid := false
	if st.refuseInvalid {
		if r := Validate(s); !r.Valid() {
			return nil, &InvalidFileError{File: st.path, Issues: r.Errors}
		}
		valid = true
	}
	if err := fn(s); err != nil {
		return nil, err
	}
	if err := st.commit(s, data, valid, checkTransitions); err != nil {
		return nil, err
	}
	return s, nil
}

// lockedRead takes the store's lock and reads the file under it; the caller
// calls unlock when done.
func (st *Store) lockedRead() (data []byte, unlock func(), err error) {
	if err := CheckPath(st.path); err != nil {
		return nil, nil, err
	}
	unlock, err = st.lock()
	if err != nil {
		return nil, nil, err
	}
	data, err = readRegular(st.path)
	if err != nil {
		unlock()
		return nil, nil, st.readError(err)
	}
	return data, unlock, nil
}

// commit writes s, read from data and changed, unless the change adds
// contract errors (any error at all when the file was valid as read) or,
// with checkTransitions, makes an illegal status transition.
func (st *Store) commit(s *State, data []byte, valid, checkTransitions bool) error {
	after := Validate(s)
	var issues []Issue
	if len(after.Errors) > 0 && valid {
		issues = after.Errors
	} else if len(after.Errors) > 0 {
		// Only errors the change added are refused (a person may repair a
		// broken file step by step): compare with the file as it was read.
		orig, err := st.parse(data)
		if err != nil {
			return err
		}
		issues = newIssues(Validate(orig).Errors, after.Errors)
	}
	if checkTransitions {
		issues = append(issues, transitionIssues(s.doc.snap, s)...)
	}
	if len(issues) > 0 {
		return &ValidationError{File: st.path, Issues: issues}
	}
	out := Marshal(s)
	if bytes.Equal(out, data) {
		return nil
	}
	return writeAtomic(st.path, [][]byte{out}, st.guard, &st.written)
}

// Create writes a new state file; it refuses to replace an existing one
// unless overwrite is set. The state must be valid. Only a regular file is
// ever replaced: a directory, FIFO, socket or device at the path is refused
// (a *PathError) with or without overwrite.
func (st *Store) Create(s *State, overwrite bool) error {
	_, err := st.CreateReplacing(s, overwrite)
	return err
}

// Replaced is the regular file a Create replaced.
type Replaced struct {
	Path string // the file replaced: the state path, or the file its symbolic link leads to
	Size int64  // its size in bytes
}

// CreateReplacing is Create, and also returns the file it replaced (nil
// when there was none).
func (st *Store) CreateReplacing(s *State, overwrite bool) (*Replaced, error) {
	if r := Validate(s); !r.Valid() {
		return nil, &ValidationError{File: st.path, Issues: r.Errors}
	}
	if _, err := st.existing(overwrite); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(st.path), 0o755); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	unlock, err := st.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Look again under the lock: the path may have changed meanwhile.
	old, err := st.existing(overwrite)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(st.path, [][]byte{Marshal(s)}, nil, &st.written); err != nil {
		return nil, err
	}
	return old, nil
}

// existing checks the path for Create: nothing there is fine, a regular
// file only with overwrite (it is returned), anything else never.
func (st *Store) existing(overwrite bool) (*Replaced, error) {
	err := CheckPath(st.path)
	switch {
	case errors.Is(err, ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case !overwrite:
		return nil, fmt.Errorf("%s already exists (use --force to replace it)", st.path)
	}
	fi, err := os.Stat(st.path)
	if err != nil {
		return nil, fmt.Errorf("cannot check state file: %w", err)
	}
	return &Replaced{Path: RealPath(st.path), Size: fi.Size()}, nil
}

// lock takes the store's cross-process lock: a lock file beside the real
// file (symbolic links resolved), so that every path to one state file
// shares one lock.
func (st *Store) lock() (func(), error) {
	real := RealPath(st.path)
	dir := filepath.Dir(real)
	if _, err := os.Stat(dir); err != nil {
		return nil, st.readError(err)
	}
	l := flock.New(real+".lock", flock.SetFlag(lockFlag()))
	if err := l.Lock(); err != nil {
		return nil, fmt.Errorf("lock %s: %w", st.path, err)
	}
	return func() { _ = l.Unlock() }, nil
}

// lockFlag is how a lock file is opened: as gofrs/flock does, and without
// blocking should the lock file be a FIFO.
func lockFlag() int {
	switch runtime.GOOS {
	case "aix", "solaris", "illumos":
		return os.O_CREATE | os.O_RDWR | oNonblock
	}
	return os.O_CREATE | os.O_RDONLY | oNonblock
}

// writeAtomic replaces path with the pieces of data, one after the other: a
// temp file in the same directory, fsync, rename over the old file, fsync of
// the directory. A crash at any moment leaves either the old or the new
// file, never a mix.
func writeAtomic(path string, data [][]byte, guard func() error, written *fs.FileInfo) (err error) {
	// Write through a symlink: renaming over the link itself would detach
	// it from the file it points to (seed defect D39).
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	dir := filepath.Dir(path)
	// The caller holds the lock, so a temp file already here belongs to a
	// writer that was killed between create and rename: remove it.
	if stale, _ := filepath.Glob(filepath.Join(dir, "."+filepath.Base(path)+".tmp-*")); len(stale) > 0 {
		for _, f := range stale {
			_ = os.Remove(f)
		}
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	for _, piece := range data {
		if _, err = f.Write(piece); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err = f.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if guard != nil {
		if err = guard(); err != nil {
			return err
		}
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if written != nil {
		*written = fi
	}
	return syncDir(dir)
}
