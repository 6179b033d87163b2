package cli

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/state"
)

// The hand-written state document must be byte-identical to encoding/json's.
func TestStateJSONMatchesEncodingJSON(t *testing.T) {
	reason := "odd \"reason\"\n\t\x01 <b>&\u2028 \xff end"
	docs := []stateDoc{
		newStateDoc(state.New(state.Objective{Goal: "g"}, nil, "p")),
		{
			Exists: true, Status: "running", Iteration: 3, StallCount: 1, PrevPendingCount: -1, StopReason: &reason,
			Atoms: []stateAtomDoc{
				{ID: "A1", Description: "x \\ y ✓", Status: "resolved", DependsOn: []string{}},
				{ID: "B\"2", Description: "", Status: "pending", DependsOn: []string{"A1", "é"}, ORGroup: "g"},
				{ID: "B3", Description: "failed", Status: "pending", DependsOn: []string{}, ORGroup: "g", Failed: true},
			},
			ExecutableAtoms: []string{"B\"2"},
			Bindings: bindingsDoc{
				{AtomID: "A1", Summary: reason, Artifacts: []string{"a.go", "b/c.md"}},
				{AtomID: "Z", Summary: "none"},
			},
			Summary: stateSummaryDoc{Total: 3, Pending: 1, Resolved: 1, Failed: 1, Executable: 1},
		},
	}
	for _, doc := range docs {
		var want, got bytes.Buffer
		writeJSON(&want, doc)
		if err := writeStateJSON(&got, doc); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want.String(), got.String()); d != "" {
			t.Errorf("state JSON differs from encoding/json (-want +got):\n%s", d)
		}
	}
}
