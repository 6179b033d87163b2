package local

import (
	"context"
	"sync"
	"testing"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/prompt"
)

// prompter renders every task's prompt, as the CLI backends do, and keeps
// the largest size.
type prompter struct {
	mu    sync.Mutex
	max   int
	total int
	n     int
}

func (p *prompter) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	s, err := prompt.Renderer{}.Render(t)
	if err != nil {
		return agent.Result{}, err
	}
	p.mu.Lock()
	p.max = max(p.max, len(s))
	p.total += len(s)
	p.n++
	p.mu.Unlock()
	return agent.Result{Success: true, Summary: "built it; tests pass", Artifacts: []string{"pkg/file.go"}, Feasible: true, Passed: true}, nil
}

// promptSizes runs a whole loop of n layered atoms and returns the largest
// and the mean prompt.
func promptSizes(tb testing.TB, n int) (maxBytes, meanBytes int) {
	path := benchProject(tb, n)
	p := &prompter{}
	out, err := Run(context.Background(), Options{StateFile: path, Agent: p})
	if err != nil || out.Reason != engine.Completed {
		tb.Fatalf("%+v %v", out, err)
	}
	return p.max, p.total / p.n
}

// An agent's prompt holds its atom and its dependencies' bindings only: it
// does not grow with the graph.
func TestPromptSizeIsFlatInTheNumberOfAtoms(t *testing.T) {
	small, _ := promptSizes(t, 10)
	large, _ := promptSizes(t, 2_000)
	// Ids and descriptions get a few digits longer; at most three
	// dependencies per atom in both graphs.
	if large > small+300 {
		t.Fatalf("largest prompt: %d bytes with 10 atoms, %d with 2,000", small, large)
	}
}
