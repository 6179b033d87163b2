package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotRegular is wrapped by every PathError: the state path names
// something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// PathError is a state path that names a directory, a named pipe, a socket,
// a device or another special file: aot reads and writes only regular files,
// and never opens anything else (a FIFO would block, a device is not ours).
type PathError struct {
	Path   string // the path as given
	Kind   string // what it is, as FileKind says it: "a named pipe (FIFO)"
	Target string // the file a symbolic link leads to, when Path is one
}

func (e *PathError) Error() string {
	if e.Target != "" {
		return fmt.Sprintf("state file %s is a symbolic link to %s, which is %s, not a regular file", e.Path, e.Target, e.Kind)
	}
	return fmt.Sprintf("state file %s is %s, not a regular file", e.Path, e.Kind)
}

func (e *PathError) Unwrap() error { return ErrNotRegular }

// FileKind names the type of a file mode as a sentence fragment: "a regular
// file", "a directory", "a named pipe (FIFO)", "a socket", "a character
// device", "a block device", "a symbolic link" or "a special file".
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "a special file"
	}
}

// CheckPath says whether path may be used as a state file, looking at it
// with stat only (it opens nothing, so it cannot block). It returns nil for
// a regular file (or a symbolic link to one), a *PathError for a directory,
// FIFO, socket, device or other special file, an error wrapping ErrNotExist
// when nothing is there (aot init accepts that; every other command
// refuses it), and the stat error otherwise.
func CheckPath(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s", ErrNotExist, path)
		}
		return fmt.Errorf("cannot check state file: %w", err)
	}
	if fi.Mode().IsRegular() {
		return nil
	}
	return notRegular(path, fi.Mode())
}

func notRegular(path string, m fs.FileMode) *PathError {
	pe := &PathError{Path: path, Kind: FileKind(m)}
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		if target, err := filepath.EvalSymlinks(path); err == nil {
			pe.Target = target
		} else {
			pe.Target = "another file"
		}
	}
	return pe
}

// RealPath is path with every symbolic link resolved, or path itself when
// it cannot be resolved (it does not exist yet). Locks are keyed on it, so
// that two links to one state file share one lock.
func RealPath(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}

// openRegular opens path for reading without blocking (O_NONBLOCK where the
// system has it: opening a FIFO would otherwise wait for a writer) and
// refuses, by what it opened rather than by an earlier stat, anything that
// is not a regular file. A path that turns into a FIFO after CheckPath
// looked at it therefore cannot hang the command.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		// A socket cannot be opened at all (ENXIO): say what it is.
		if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
			return nil, nil, notRegular(path, fi.Mode())
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, notRegular(path, fi.Mode())
	}
	return f, fi, nil
}

// MaxFileSize is the largest state file aot reads: 64 MiB, three times a
// 100,000-atom work graph (19.6 MB). A bigger file is refused from its size alone,
// before anything is read, so that a wrong path (a disk image, a log) cannot
// make a command read and parse hundreds of megabytes.
const MaxFileSize = 64 << 20

// TooLargeError is a state file bigger than MaxFileSize.
type TooLargeError struct {
	Path string
	Size int64 // bytes: its size when looked at, or more than the limit when it grew while read
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("state file %s is %s, more than the %s a state file may hold; check the path", e.Path, humanSize(e.Size), humanSize(MaxFileSize))
}

// humanSize writes a size in bytes, KiB or MiB.
func humanSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// readRegular is os.ReadFile through openRegular, refusing a file over
// MaxFileSize by the size of what was opened (and, should it grow while it is
// read, by reading at most one byte past the limit).
func readRegular(path string) ([]byte, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > MaxFileSize {
		return nil, &TooLargeError{Path: path, Size: fi.Size()}
	}
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileSize+1)); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if buf.Len() > MaxFileSize {
		return nil, &TooLargeError{Path: path, Size: int64(buf.Len())}
	}
	return buf.Bytes(), nil
}

// Find returns the state file a command uses when no path is given: the
// first DefaultPath in dir or one of its parents, as git finds .git. Anything
// at that path counts (a FIFO found there is refused later, by CheckPath,
// rather than skipped). It returns false when no directory up to the root
// has one.
func Find(dir string) (string, bool) {
	for {
		p := filepath.Join(dir, DefaultPath)
		if _, err := os.Lstat(p); err == nil {
			return p, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// OpenRegular opens a state file for reading the way every command does:
// without blocking, and refusing what is not a regular file (see
// openRegular). For readers outside the store, such as the hooks' quick
// look at control.status.
func OpenRegular(path string) (*os.File, error) {
	f, _, err := openRegular(path)
	return f, err
}

// ProjectRoot is the project a state file belongs to: the parent of the
// .claude folder it is in (directly, or below it as the loops aot serve
// creates in .claude/aot-loops/ID/ are), else the state file's own folder.
// Agents and checks run there.
func ProjectRoot(stateFile string) string {
	abs, err := filepath.Abs(stateFile)
	if err != nil {
		abs = stateFile
	}
	dir := filepath.Dir(abs)
	for d := dir; ; {
		if filepath.Base(d) == ".claude" {
			return filepath.Dir(d)
		}
		up := filepath.Dir(d)
		if up == d {
			return dir
		}
		d = up
	}
}
