package durable

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aot-loop/aot/internal/workspace"
)

// BenchmarkPooledWorktreesUnderMerges is the pool of worktrees under the
// load of a loop with two workers, without Temporal: six attempts at once
// (three per worker's clone, each holding its commit), and merges of each
// worker's held commits in turn onto one integration branch (so each
// worker fetches the other's), b.N attempts in all. Every attempt must
// change its own file and nothing else; refused-reuses counts the
// worktrees workspace.Reuse found not to be their start (the worker then
// made a new one): on this machine about one attempt in a thousand.
//
//	go test -run '^$' -bench PooledWorktreesUnderMerges -benchtime 3000x ./internal/durable/
func BenchmarkPooledWorktreesUnderMerges(b *testing.B) {
	repo, seed := newRemote(b, map[string]string{})
	workers := []*Activities{
		{Cache: b.TempDir(), Identity: "a", NewAgent: execAgents, OwnQueue: "q@a"},
		{Cache: b.TempDir(), Identity: "b", NewAgent: execAgents, OwnQueue: "q@b"},
	}
	ctx := context.Background()
	refused := workspace.ReuseRefusals()
	var mu sync.Mutex
	head := seed
	held := map[int][]MergeAtom{}
	next := 0
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := g % 2
			for {
				mu.Lock()
				n, h := next, head
				next++
				mu.Unlock()
				if n >= b.N {
					return
				}
				atom := fmt.Sprintf("A%05d", n)
				in := attemptInput(repo, h, atom, `echo x > `+atom+`.txt && echo '{"success": true}'`)
				in.Hold = true
				r, err := workers[w].Attempt(ctx, in)
				if err != nil || r.Commit == "" || len(r.RepoFiles) != 1 || r.RepoFiles[0] != atom+".txt" {
					fail(fmt.Errorf("attempt %s: changed %d files (%.80v), %v", atom, len(r.RepoFiles), r.RepoFiles, err))
					continue
				}
				mu.Lock()
				held[w] = append(held[w], MergeAtom{Branch: in.Branch, Atom: atom, Attempt: 1, Message: atom,
					Commit: r.Commit, Base: r.Base, Files: r.RepoFiles, Held: true})
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	merged := make(chan struct{})
	go func() {
		defer close(merged)
		left := -1 // rounds left once the attempts are done: one for each worker
		for w := 0; left != 0; w = 1 - w {
			select {
			case <-done:
				if left < 0 {
					left = 2
				}
			default:
			}
			if left > 0 {
				left--
			}
			mu.Lock()
			batch, h := held[w], head
			held[w] = nil
			mu.Unlock()
			if len(batch) == 0 {
				continue
			}
			res, err := workers[w].MergeBatch(ctx, MergeBatchInput{Repo: repo, Base: "main", Loop: "loop-1", Head: h, Atoms: batch})
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			head = res.Commit
			mu.Unlock()
		}
	}()
	wg.Wait()
	close(done)
	<-merged
	for _, err := range errs[:min(len(errs), 5)] {
		b.Error(err)
	}
	b.ReportMetric(float64(workspace.ReuseRefusals()-refused), "refused-reuses")
}
