package agent

import (
	"context"

	"github.com/aot-loop/aot/internal/proc"
)

type startKey struct{}

// WithStart returns a context that makes Exec call fn with the attempt's
// process tree right after the agent process starts, before its answer is
// read. The caller can journal the tree and, should it crash, kill the
// survivors later with proc.KillTree. fn runs on the attempt's goroutine and
// should return quickly.
func WithStart(ctx context.Context, fn func(proc.Tree)) context.Context {
	return context.WithValue(ctx, startKey{}, fn)
}

// startFunc returns the function set by WithStart, or nil.
func startFunc(ctx context.Context) func(proc.Tree) {
	fn, _ := ctx.Value(startKey{}).(func(proc.Tree))
	return fn
}
