package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// The server reads and writes a loop's files only inside a served
// workspace. A loop's state path comes from a file anyone may edit
// (.loop/{id}.json names it), and links can appear under a workspace at any
// time: so the path is checked, its links resolved, before every read and
// every write, not once when the loop is found.

// outsideError is a path that leads out of every served workspace.
type outsideError struct {
	path, real string
	workspaces []string
}

func (e *outsideError) Error() string {
	where := e.path
	if e.real != e.path {
		where += " (a link to " + e.real + ")"
	}
	return fmt.Sprintf("%s is outside every served workspace (%s): aot serve neither reads nor writes it", where, strings.Join(e.workspaces, ", "))
}

// unreadableError is a loop whose state cannot be read or checked: a
// refusal to act on it, with the reason.
type unreadableError struct{ err error }

func (e *unreadableError) Error() string { return "the loop's state cannot be read: " + e.err.Error() }
func (e *unreadableError) Unwrap() error { return e.err }

// resolve is path, absolute, with every symbolic link in it resolved; a
// tail that does not exist yet is kept as written. A link that leads
// nowhere, or a folder that cannot be looked into, is an error: what it
// would lead to is unknown.
func resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var rest []string
	for d := abs; ; {
		real, err := filepath.EvalSymlinks(d)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if _, lerr := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) || lerr == nil {
			return "", fmt.Errorf("%s cannot be checked: %w", path, err)
		}
		up := filepath.Dir(d)
		if up == d {
			return abs, nil
		}
		rest = append([]string{filepath.Base(d)}, rest...)
		d = up
	}
}

// inside is path with its links resolved, when that is inside a served
// workspace.
func (r *registry) inside(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", &unreadableError{err}
	}
	// The common case costs a look at each part below the workspace: a path
	// written under a served workspace with no link below it stays there.
	// (The served folders themselves are taken as they were at start.)
	for i, ws := range r.workspaces {
		for _, base := range []string{ws, r.roots[i]} {
			if rest, ok := strings.CutPrefix(abs, base+string(filepath.Separator)); ok {
				if real, plain := plainBelow(base, r.roots[i], rest); plain {
					return real, nil
				}
			}
		}
	}
	real, err := resolve(abs)
	if err != nil {
		return "", &unreadableError{err}
	}
	for _, root := range r.roots {
		if real == root || strings.HasPrefix(real, root+string(filepath.Separator)) {
			return real, nil
		}
	}
	return "", &outsideError{path: abs, real: real, workspaces: r.workspaces}
}

// plainBelow is rest under root when no part of ws/rest below ws is a
// link (a part that does not exist ends the look: nothing below it does).
func plainBelow(ws, root, rest string) (string, bool) {
	p := ws
	for part := range strings.SplitSeq(rest, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			return "", false
		}
	}
	return filepath.Join(root, rest), true
}

// within checks path against the served workspaces.
func (r *registry) within(path string) error {
	_, err := r.inside(path)
	return err
}

// checked is the loop's state file once it, its journal folder and its
// journal are found inside a served workspace. (The journal lives beside
// the file the state path leads to: journal.DirFor.)
func (l *loop) checked() (string, error) {
	real, err := l.reg.inside(l.stateFile)
	if err != nil {
		return "", err
	}
	if err := l.reg.within(filepath.Join(filepath.Dir(real), journal.Dir, journal.FileName)); err != nil {
		return "", err
	}
	return l.stateFile, nil
}

// read is the loop's state, read once its path is checked.
func (l *loop) read() (*state.State, error) {
	sf, err := l.checked()
	if err != nil {
		return nil, err
	}
	st, err := state.NewStore(sf).RefuseInvalid().Read()
	if err != nil {
		return nil, &unreadableError{err}
	}
	return st, nil
}

// readReport is read for a look only: the state through the quick reader
// with its validation report, valid or not.
func (l *loop) readReport() (*state.State, state.Report, error) {
	sf, err := l.checked()
	if err != nil {
		return nil, state.Report{}, err
	}
	st, rep, err := state.NewStore(sf).ReadReport()
	if err != nil {
		return nil, state.Report{}, &unreadableError{err}
	}
	return st, rep, nil
}

// stateError answers a request about a loop whose files are refused:
// 403 for a path outside the workspaces, 409 for a state that cannot be
// read (the loop's state conflicts with the request; the message says why).
func stateError(w http.ResponseWriter, err error) {
	var out *outsideError
	if errors.As(err, &out) {
		writeError(w, http.StatusForbidden, "%v", err)
		return
	}
	writeError(w, http.StatusConflict, "%v", err)
}
