package hooks

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aot-loop/aot/internal/runlock"
	"github.com/aot-loop/aot/internal/state"
)

// loop is what the cheap checks found: the state file of a running loop
// that the hook's session owns, with no engine running it.
type loop struct {
	path string // the state file
	root string // the project: where the base case runs
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
// first: a state file exists, the hook's session owns its loop (recorded
// when the session started it: see RecordOwner), the loop is running (else
// the session's stale ownership is forgotten), and no engine is running
// it. nil means no decision. A session that does not own the loop is
// answered after one failed open of the owner file: neither the state nor
// anything else is read or written.
func gate(o *Options, in Input) (*loop, error) {
	if in.SessionID == "" {
		return nil, nil
	}
	path, ok := locate(o, in)
	if !ok {
		return nil, nil
	}
	owner, err := ReadOwner(path)
	if err != nil || !owner.owns(o.Client, in.SessionID) {
		return nil, err
	}
	status, known, err := state.PeekStatus(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if known && status != state.ControlRunning {
		// The loop is not running: this session no longer drives it.
		return nil, ReleaseOwner(path)
	}
	// aot run's engine holds the run lock: the loop is delegated, and its
	// agents are bounded by the engine, not by hooks.
	if _, held, err := runlock.Holder(path); err != nil || held {
		return nil, err
	}
	return &loop{path: path, root: state.ProjectRoot(path)}, nil
}
