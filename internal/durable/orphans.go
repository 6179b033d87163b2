package durable

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"runtime"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/proc"
)

// Agents a worker leaves behind. Each agent runs under a guard that kills
// its process tree when the worker's process ends, however it ends (see
// package confine). For what a guard could not do (the guard killed with
// the worker, a machine that cut the power of neither), each activity's
// folder work/wt-* has beside it wt-*.trees: one JSON line per agent
// process tree started for it (proc.Tree: its process group and token).
// The sweep of the next worker on that cache kills the trees of folders
// whose lock nobody holds, before it removes the folders. On Linux
// proc.KillTree signals only processes that still carry the tree's token,
// so a pid reused since by another program is never killed; elsewhere it
// could not tell, so the trees are left to their guards.

// treesPath is where an activity's folder dir notes its agents' trees.
func treesPath(dir string) string { return dir + ".trees" }

// noteTrees returns ctx that notes every agent process tree started under
// it in the scratch's trees file, and still tells whoever asked before
// (agent.WithStart).
func (s *scratch) noteTrees(ctx context.Context) context.Context {
	before := agent.StartFunc(ctx)
	return agent.WithStart(ctx, func(t proc.Tree) {
		if line, err := json.Marshal(t); err == nil {
			if f, err := os.OpenFile(treesPath(s.dir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
				f.Write(append(line, '\n'))
				f.Sync()
				f.Close()
			}
		}
		if before != nil {
			before(t)
		}
	})
}

// killLeftTrees kills the agent trees noted beside the activity folder
// dir, left by a worker that died, and removes the note; it says how many
// trees were still alive.
func killLeftTrees(dir string) (alive int) {
	defer os.Remove(treesPath(dir))
	f, err := os.Open(treesPath(dir))
	if err != nil || runtime.GOOS != "linux" {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var t proc.Tree
		if json.Unmarshal(sc.Bytes(), &t) != nil || t.IsZero() {
			continue
		}
		if proc.Alive(t) {
			alive++
			_ = proc.KillTree(t)
		}
	}
	return alive
}
