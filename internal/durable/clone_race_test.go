package durable

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// A fetch and a new worktree in one clone at once: git writes a new
// worktree's HEAD as zeros before it checks the worktree out, and a
// fetch that brings commits checks what it has against every worktree's
// HEAD. The fetch never sees a worktree half made.
func TestAFetchNeverSeesAWorktreeHalfMade(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	ctx := context.Background()
	c, _, err := a.cloneOf(ctx, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	pusher := filepath.Join(t.TempDir(), "pusher")
	gitT(t, filepath.Dir(pusher), "clone", "-q", repo, pusher)
	const rounds = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range rounds {
			// Each tree a new worktree: none is free in the pool.
			tree, err := a.newAttemptTree(ctx, c, seed, "loop-1", "", "", fmt.Sprintf("A%d", i), 1)
			if err != nil {
				errs <- err
				continue
			}
			defer tree.remove(ctx)
		}
	}()
	go func() {
		defer wg.Done()
		for i := range rounds {
			// A new commit on the remote each time, for the fetch to bring.
			cmd := exec.Command("sh", "-c", fmt.Sprintf(`echo %d > f.txt && git add f.txt && git -c user.name=P -c user.email=p@example.com commit -qm %d && git push -q origin HEAD:main`, i, i))
			cmd.Dir = pusher
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%v: %s", err, out)
				return
			}
			if err := c.fetch(ctx); err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
