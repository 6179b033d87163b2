package local

import (
	"fmt"
	"os"

	"github.com/aot-loop/aot/internal/engine"
)

// A loop is bound to the folders it started in. A project folder renamed or
// deleted while the loop runs is noticed when the state file goes missing
// from its old path: the engine then stops with a MovedError instead of
// writing the state file back, which would recreate the old path and go on
// working there while the project is elsewhere. Nothing is lost: the
// journal goes with the folder (the engine appends to the file it opened),
// so the next aot run where the project is now replays what the state file
// has not caught up with.

// placeStamp identifies the project folder a run started in. The state
// file's own folder (.claude) is not in it: deleted with the state file, it
// is made again, since the project is still where it was.
type placeStamp struct {
	root string
	fi   os.FileInfo // nil when it could not be read: nothing to compare
}

func stampPlace(stateFile string) placeStamp {
	p := placeStamp{root: engine.ProjectRoot(stateFile)}
	p.fi, _ = os.Stat(p.root)
	return p
}

// check reports a project folder that is gone or is another folder now.
func (p placeStamp) check() error {
	if p.fi == nil {
		return nil
	}
	fi, err := os.Stat(p.root)
	switch {
	case err != nil:
		return &MovedError{Path: p.root, Gone: true}
	case !os.SameFile(fi, p.fi):
		return &MovedError{Path: p.root}
	}
	return nil
}

// MovedError is a run whose project folder was moved or deleted under it.
type MovedError struct {
	Path string
	Gone bool // nothing is at Path now; else another folder is
}

func (e *MovedError) Error() string {
	what := "is another folder now"
	if e.Gone {
		what = "is gone"
	}
	return fmt.Sprintf("the project folder %s %s: it was moved or deleted while the loop ran; the loop stops rather than recreate it there (its journal went with it: run aot run where the project is now)", e.Path, what)
}
