package local

import (
	"fmt"
	"time"

	"github.com/aot-loop/aot/internal/state"
)

// EnsureLoopID gives the loop of store's state file its id when s, the
// state just read from it, has none yet (its first start, or a file written
// anew by aot init), and returns the state as written (s itself when it had
// an id). The id names the loop's git branches, worktree folders
// and Temporal workflow, so it is in the state file before any of them
// exists: a resumed run finds the same names.
func EnsureLoopID(store *state.Store, s *state.State) (*state.State, error) {
	if s.Control.LoopID != "" {
		return s, nil
	}
	_, err := store.UpdateControl(func(s *state.State) error {
		if s.Control.LoopID == "" {
			s.Control.LoopID = state.NewLoopID(time.Now())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("give the loop its id: %w", err)
	}
	return store.Read()
}
