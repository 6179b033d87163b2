package durable

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// What this worker process knows of each clone without asking git: the
// integration branch's heads its merges wrote into it (the attempts that
// follow start from them, and need not ask whether the clone holds them),
// and the remote's branches as it last pushed them from it (a merge of
// branches it pushed itself need not fetch first: the push's leases refuse
// it if any has moved, and it is then fetched and merged again). It holds
// for the clone's .git folder it was learnt in: a clone made again, by this
// worker or by another sharing the cache folder, is asked again.
var known sync.Map // clone folder -> *cloneKnowledge

type cloneKnowledge struct {
	mu     sync.Mutex
	git    os.FileInfo // the clone's .git folder
	heads  []string
	pushed map[string]string // branch -> commit
}

const (
	headsKept  = 16
	pushedKept = 4096 // branches: past it, what is known is forgotten
)

// knowledge returns c's locked (the caller unlocks it), reset when its .git
// folder is not the one it was learnt in; nil when the clone has none (or
// has no .git folder).
func (c *clone) knowledge(create bool) *cloneKnowledge {
	fi, err := os.Stat(filepath.Join(c.dir, ".git"))
	if err != nil {
		return nil
	}
	v, ok := known.Load(c.dir)
	if !ok {
		if !create {
			return nil
		}
		v, _ = known.LoadOrStore(c.dir, &cloneKnowledge{})
	}
	k := v.(*cloneKnowledge)
	k.mu.Lock()
	if k.git == nil || !os.SameFile(k.git, fi) {
		k.git, k.heads, k.pushed = fi, nil, nil
	}
	return k
}

// wrote notes that a merge wrote commit into c.
func (c *clone) wrote(commit string) {
	k := c.knowledge(true)
	if k == nil {
		return
	}
	defer k.mu.Unlock()
	if len(k.heads) == headsKept {
		k.heads = k.heads[1:]
	}
	k.heads = append(k.heads, commit)
}

// made reports whether a merge of this process wrote commit into c.
func (c *clone) made(commit string) bool {
	k := c.knowledge(false)
	if k == nil {
		return false
	}
	defer k.mu.Unlock()
	return slices.Contains(k.heads, commit)
}

// pushedTo notes the remote's branches as this process just pushed them
// from c: branch -> commit, "" for a branch it deleted.
func (c *clone) pushedTo(branches map[string]string) {
	k := c.knowledge(true)
	if k == nil {
		return
	}
	defer k.mu.Unlock()
	if k.pushed == nil || len(k.pushed) >= pushedKept {
		k.pushed = map[string]string{}
	}
	for b, commit := range branches {
		if commit == "" {
			delete(k.pushed, b)
		} else {
			k.pushed[b] = commit
		}
	}
}

// pushedAll returns the remote's branches named as this process last
// pushed them from c, when it pushed every one of them; nil otherwise.
func (c *clone) pushedAll(names []string) map[string]string {
	k := c.knowledge(false)
	if k == nil {
		return nil
	}
	defer k.mu.Unlock()
	out := make(map[string]string, len(names))
	for _, n := range names {
		commit, ok := k.pushed[n]
		if !ok {
			return nil
		}
		out[n] = commit
	}
	return out
}

// forget drops what is known of c, for git to be asked again.
func (c *clone) forget() { known.Delete(c.dir) }
