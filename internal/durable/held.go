package durable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/aot-loop/aot/internal/workspace"
)

// Merge where the work is. A worker attempt's commit is made in its
// worker's clone; pushing it to the atom's branch, for a merge on any
// worker to fetch, is the costliest step of an attempt (a push spawns half
// a dozen git processes on both ends, and crosses the network to a real
// remote). So each worker also serves a task queue of its own (ownQueue),
// for merges alone; an attempt of a workflow that allows it
// (AttemptInput.Hold) keeps its commit in the clone and names that queue
// (AttemptResult.HeldOn); the workflow merges the held commits of one
// worker in one MergeBatch there, which pushes only the integration branch.
//
// A worker that stops pushes what it still holds to the atoms' branches
// first (attempts that end while it stops push as before). A batch its
// queue does not take within holderWait (the worker died, or stopped) is
// merged on the shared queue from those branches; an atom whose branch is
// not there (the worker was killed) runs again.

// holderWait is how long a batch of held commits waits for its worker to
// take it (ScheduleToStartTimeout) before it is merged from the pushed
// branches instead.
const holderWait = 30 * time.Second

// ownQueue names a worker process's own task queue: the shared queue's
// name, the worker's identity and a random part (a worker restarted with
// the same identity, pid 1 in a container, holds nothing of its
// predecessor's).
func ownQueue(shared, identity string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s@%s-%s", shared, identity, hex.EncodeToString(b))
}

// holding is what a worker holds: per repository and atom branch, the
// commit an attempt made and has not yet merged or pushed.
type holding struct {
	mu       sync.Mutex
	stopping bool
	commits  map[heldKey]string
}

type heldKey struct{ repo, branch string }

// hold notes that commit, made for branch of repo, stays in this worker's
// clone; false when the worker is stopping (the attempt pushes it).
func (h *holding) hold(repo, branch, commit string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping {
		return false
	}
	if h.commits == nil {
		h.commits = map[heldKey]string{}
	}
	h.commits[heldKey{repo, branch}] = commit
	return true
}

// held returns the commit held for branch of repo, "" for none.
func (h *holding) held(repo, branch string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.commits[heldKey{repo, branch}]
}

// merged forgets the branches of repo a pushed merge took.
func (h *holding) merged(repo string, branches []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range branches {
		delete(h.commits, heldKey{repo, b})
	}
}

// stop makes every later attempt push its commit, and returns what is
// held, per repository (kept: a batch already on its way may still merge
// it here).
func (h *holding) stop() map[string]map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopping = true
	out := map[string]map[string]string{}
	for k, commit := range h.commits {
		if out[k.repo] == nil {
			out[k.repo] = map[string]string{}
		}
		out[k.repo][k.branch] = commit
	}
	return out
}

// pushHeld pushes the commits this worker holds to their atoms' branches,
// one push per repository (each branch expected absent: one that exists
// was pushed by a retry elsewhere, and stays), so that the merges waiting
// for this worker can be made from the remote once it is gone. Later
// attempts push their own.
func (a *Activities) pushHeld(ctx context.Context) (pushed int, _ error) {
	var errs []error
	for repo, branches := range a.holding.stop() {
		dir := filepath.Join(a.Cache, "repos", nameFor(repo))
		var ups []workspace.RemoteUpdate
		for _, b := range slices.Sorted(maps.Keys(branches)) {
			ups = append(ups, workspace.RemoteUpdate{Ref: "refs/heads/" + b, Commit: branches[b]})
		}
		if workspace.Push(ctx, dir, repo, ups...) == nil {
			pushed += len(ups)
			continue
		}
		// One refused: each alone, so that the others still go.
		for _, u := range ups {
			if err := workspace.Push(ctx, dir, repo, u); err != nil {
				errs = append(errs, fmt.Errorf("push the held %s: %w", u.Ref, err))
			} else {
				pushed++
			}
		}
	}
	return pushed, errors.Join(errs...)
}

// holderGone reports whether err is a batch of held commits that its
// worker's queue did not take in time.
func holderGone(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}
