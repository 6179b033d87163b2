package local

import (
	"sync"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/proc"
)

// Agents die with their attempt (package proc) and, where the platform
// allows, with the engine. What survives a crashed engine (a grandchild
// that left the process group, an agent on a platform without parent-death
// signals) is recorded here: every attempt's process tree goes to the
// journal when it starts, the trees still in flight go into every
// checkpoint, and a resuming engine kills them all before it runs anything.

// treeSet holds the process trees of the attempts in flight. The agents'
// goroutines add to it; the loop reads it for checkpoints.
type treeSet struct {
	mu    sync.Mutex
	trees map[int]proc.Tree // task id -> tree
}

func (ts *treeSet) add(id int, t proc.Tree) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.trees == nil {
		ts.trees = map[int]proc.Tree{}
	}
	ts.trees[id] = t
}

func (ts *treeSet) remove(id int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.trees, id)
}

func (ts *treeSet) list() []proc.Tree {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make([]proc.Tree, 0, len(ts.trees))
	for _, t := range ts.trees {
		out = append(out, t)
	}
	return out
}

// started records an attempt's process tree: in memory for checkpoints, and
// in the journal at once (synced), so that even a crash right after the
// start leaves a trace to clean up.
func (l *localHost) started(id int, atom string, attempt int, t proc.Tree) {
	l.trees.add(id, t)
	_ = l.jr.Append(journal.Event{Atom: atom, Attempt: attempt}.With(journal.ProcessData{Tree: t}))
	_ = l.jr.Sync()
}

func (l *localHost) liveTrees() []proc.Tree { return l.trees.list() }

// killSurvivors kills the process trees that a previous engine left: those
// in its last checkpoint and those started after it.
func (l *localHost) killSurvivors(cp *journal.Event, after []journal.Event) {
	var trees []proc.Tree
	if cp != nil {
		trees = append(trees, journal.DataOf[journal.CheckpointData](*cp).Processes...)
	}
	for _, ev := range after {
		if ev.Type == journal.Process {
			trees = append(trees, journal.DataOf[journal.ProcessData](ev).Tree)
		}
	}
	killed := 0
	for _, t := range trees {
		if t.IsZero() {
			continue
		}
		if proc.Alive(t) {
			killed++
		}
		_ = proc.KillTree(t)
	}
	if killed > 0 {
		l.event(journal.Event{Reason: "killed agents left running by the previous engine"}.With(journal.AtomResetData{ProcessTrees: killed}))
		l.say("killed %d agent process trees left by the previous engine", killed)
	}
}
