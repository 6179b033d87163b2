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

// Activity is one thing an agent did while it ran: a tool call, a message.
type Activity struct {
	Tool   string // the tool's name ("Bash", "Write"); empty for a message
	Detail string // one line: the command, the file, the start of the text
	// Refused is set when the agent's CLI refused this tool call; Why is
	// what it said. The engine journals it as permission_denied.
	Refused bool
	Why     string
	// Retry is set when the agent's CLI itself calls the model again after
	// a failed call (a 429, a 5xx, a dropped connection); Detail says what
	// failed and when it tries again. The engine journals it as
	// model_retry.
	Retry bool
}

type activityKey struct{}

// WithActivity returns a context that makes backends which can see inside
// an agent's run (the CLI backends) call fn for each tool call as it
// happens. fn runs on the attempt's goroutine and should return quickly.
func WithActivity(ctx context.Context, fn func(Activity)) context.Context {
	return context.WithValue(ctx, activityKey{}, fn)
}

// ActivityFunc returns the function set by WithActivity, or one that does
// nothing.
func ActivityFunc(ctx context.Context) func(Activity) {
	if fn, ok := ctx.Value(activityKey{}).(func(Activity)); ok && fn != nil {
		return fn
	}
	return func(Activity) {}
}

// StartFunc returns the function set by WithStart, or nil: backends other
// than Exec that start processes report their trees through it too.
func StartFunc(ctx context.Context) func(proc.Tree) { return startFunc(ctx) }
