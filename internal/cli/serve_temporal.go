//go:build temporal

package cli

import (
	"context"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/server"
)

// aot serve's way to the workflows of loops on Temporal, in aot-temporal:
// the calls aot status, stop, pause, resume and redirect make, through one
// client kept while it serves.

type serveWorkflows struct{ w *workflows }

func newServeWorkflows() *serveWorkflows { return &serveWorkflows{w: newWorkflows()} }

func (s *serveWorkflows) Close() error { return s.w.Close() }

func (s *serveWorkflows) Sync(ctx context.Context, stateFile string) (server.Workflow, error) {
	doc, err := s.w.sync(ctx, stateFile)
	if doc == nil {
		return server.Workflow{}, err
	}
	return doc.forServer(), err // err: a hand edit kept aside, for the notice
}

func (s *serveWorkflows) Pause(ctx context.Context, stateFile string, kill bool, reason string) error {
	return s.w.pause(ctx, stateFile, kill, reason)
}

func (s *serveWorkflows) Resume(ctx context.Context, stateFile, reason string) error {
	return s.w.resume(ctx, stateFile, reason)
}

func (s *serveWorkflows) Stop(ctx context.Context, stateFile, reason string) error {
	return s.w.stop(ctx, stateFile, reason)
}

func (s *serveWorkflows) Redirect(ctx context.Context, stateFile string, c engine.Change) error {
	return s.w.redirect(ctx, stateFile, c)
}
