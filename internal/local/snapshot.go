package local

import (
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/journal"
)

// maxSnapshotFiles bounds the before/after look at the project root; a
// larger tree is not measured (the worker's word is taken, as before).
const maxSnapshotFiles = 200_000

// fileStat is what a snapshot keeps of a file.
type fileStat struct {
	size  int64
	mtime time.Time
	mode  fs.FileMode
}

// snapshot is every file under a root, by slash-separated relative path.
type snapshot map[string]fileStat

// takeSnapshot stats the files under root, leaving out .git folders and
// what skip names; nil when the tree is too large to measure.
func takeSnapshot(root string, skip func(rel string) bool) snapshot {
	s := snapshot{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: not the agent's change to judge
		}
		rel, rerr := filepath.Rel(root, p)
		if rerr != nil || rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.Name() == ".git" || skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if len(s) >= maxSnapshotFiles {
			return fs.SkipAll
		}
		fi, ierr := d.Info()
		if ierr != nil {
			return nil
		}
		s[rel] = fileStat{size: fi.Size(), mtime: fi.ModTime(), mode: fi.Mode()}
		return nil
	})
	if err != nil || len(s) >= maxSnapshotFiles {
		return nil
	}
	return s
}

// changedSince lists the files that differ from before, sorted.
func (after snapshot) changedSince(before snapshot) []string {
	var out []string
	for p, a := range after {
		if b, ok := before[p]; !ok || b != a {
			out = append(out, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// ownFiles reports whether a path relative to root is the loop's own: the
// state file, its siblings (locks, temporary copies) and the aot-loop
// folder beside it (journal, logs, pause marker).
func ownFiles(root, stateFile string) func(rel string) bool {
	abs, err := filepath.Abs(stateFile)
	if err != nil {
		return func(string) bool { return false }
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return func(string) bool { return false }
	}
	st := filepath.ToSlash(rel)
	dir := path.Join(path.Dir(st), journal.Dir)
	return func(p string) bool {
		return p == st || strings.HasPrefix(p, st+".") || p == dir || strings.HasPrefix(p, dir+"/")
	}
}

// measureRoot runs fn, a worker attempt in the project root, and returns
// the files it changed there (nil when the tree could not be measured).
func (l *localHost) measureRoot(dir string, fn func()) *[]string {
	skip := ownFiles(dir, l.opts.StateFile)
	before := takeSnapshot(dir, skip)
	fn()
	if before == nil {
		return nil
	}
	after := takeSnapshot(dir, skip)
	if after == nil {
		return nil
	}
	changed := after.changedSince(before)
	return &changed
}
