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

// readRegular is os.ReadFile through openRegular.
func readRegular(path string) ([]byte, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf.Bytes(), nil
}
