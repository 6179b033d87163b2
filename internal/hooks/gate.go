package hooks

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
)

// loop is what the cheap checks found: the state file of a running loop
// that the hook's session owns, with no engine running it.
type loop struct {
	path    string // the state file
	root    string // the project: where the base case runs
	unowned bool   // no session owns the loop yet: see (*loop).claim
}

// locate finds the state file: the one named by the options (a relative
// path taken from the hook's cwd), else the first .claude/aot-loop-state.md
// in the hook's cwd or a directory above it. ok is false when there is none.
func locate(o *Options, in Input) (string, bool) {
	cwd := in.Cwd
	if cwd == "" && o.Getwd != nil {
		cwd, _ = o.Getwd()
	}
	if o.StateFile != "" {
		p := o.StateFile
		if !filepath.IsAbs(p) && cwd != "" {
			p = filepath.Join(cwd, p)
		}
		if _, err := os.Stat(p); err != nil {
			return "", false
		}
		return p, true
	}
	if cwd == "" {
		return "", false
	}
	return state.Find(cwd)
}

// gate runs the checks that need no full read of the state, cheapest
// first: a state file exists, its status is running (else a stale owner is
// forgotten), the session owns the loop (or, for a continuation hook, no
// session does yet), and no engine is running it. nil means no decision.
func gate(o *Options, in Input, mayClaim bool) (*loop, error) {
	if in.SessionID == "" {
		return nil, nil
	}
	path, ok := locate(o, in)
	if !ok {
		return nil, nil
	}
	status, known, err := peekStatus(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if known && status != state.ControlRunning {
		// The loop is not running: whoever owned it no longer does.
		return nil, ReleaseOwner(path)
	}
	owner, err := ReadOwner(path)
	if err != nil {
		return nil, err
	}
	if owner != nil && !owner.owns(o.Client, in.SessionID) {
		return nil, nil
	}
	// aot run's engine holds the run lock: the loop is delegated, and its
	// agents are bounded by the engine, not by hooks.
	if _, held, err := runlock.Holder(path); err != nil || held {
		return nil, err
	}
	if owner == nil && !mayClaim {
		return nil, nil
	}
	return &loop{path: path, root: state.ProjectRoot(path), unowned: owner == nil}, nil
}

// claim makes the hook's session the owner of an unowned loop, once its
// state file has been read and validated; ok is false when another session
// claimed it first.
func (l *loop) claim(o *Options, in Input) (ok bool, err error) {
	if !l.unowned {
		return true, nil
	}
	owner, err := claim(l.path, Owner{Client: o.Client, SessionID: in.SessionID, ClaimedAt: o.now().Format(time.RFC3339), How: "first-hook", Cwd: in.Cwd})
	return err == nil && owner.owns(o.Client, in.SessionID), err
}
