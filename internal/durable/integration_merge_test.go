//go:build unix

package durable

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// mergeBatches decodes the MergeBatch activities a loop's workflow
// scheduled: the atoms of each, in order.
func mergeBatches(t *testing.T, c client.Client, id string) [][]string {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out [][]string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != MergeBatchActivity {
			continue
		}
		var in MergeBatchInput
		if err := DataConverter().FromPayloads(a.GetInput(), &in); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range in.Atoms {
			names = append(names, fmt.Sprintf("%s#%d", m.Atom, m.Attempt))
		}
		out = append(out, names)
	}
	return out
}

// Six atoms whose agents wait for each other finish together on two
// workers: their merges go in batches, X's and Y's (the same file) conflict
// and the later one is re-run, and each atom lands once.
func TestAttemptsFinishingTogetherAreMergedInBatches(t *testing.T) {
	const queue = "merge-batches"
	c := twoWorkers(t, queue)
	repo, seed := newRemote(t, map[string]string{"shared.txt": "seed\n"})
	marks := t.TempDir()
	ids := []string{"A", "B", "C", "D", "X", "Y"}
	// Each first attempt marks itself and waits (at most a minute) until
	// all six have; X and Y write shared.txt, the others their own file.
	agentCmd := fmt.Sprintf(`touch %[1]s/$AOT_ATOM_ID-$AOT_ATTEMPT; `+
		`if [ "$AOT_ATTEMPT" = 1 ]; then i=0; while [ $(ls %[1]s | wc -l) -lt 6 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; fi; `+
		`case $AOT_ATOM_ID in X|Y) echo "$AOT_ATOM_ID" > shared.txt ;; *) echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" ;; esac; `+
		`echo '{"success": true, "summary": "wrote '"$AOT_ATOM_ID"'"}'`, marks)
	var atoms []state.Atom
	for _, id := range ids {
		atoms = append(atoms, state.Atom{ID: id, Description: "write " + id})
	}
	check := &state.Check{Type: state.CheckCommand, Value: "test -f A.txt && test -f B.txt && test -f C.txt && test -f D.txt"}
	s := state.New(state.Objective{Goal: "six", BaseCase: &state.BaseCase{Legacy: check},
		Constraints: state.Constraints{MaxIterations: 40, MaxParallelAgents: 6, MaxStallCount: 5}}, atoms, "six")
	s.Control.Status = state.ControlRunning
	id := "it-merge-batches"
	base := integration(id)
	gitT(t, repo, "branch", base, seed)
	in := LoopInput{Settings: engine.Settings{AgentTimeout: 2 * time.Minute}, State: state.Marshal(s), Repo: repo, Base: base, BaseCommit: seed,
		Agent: AgentChoice{Agent: "exec", Command: agentCmd}}
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue}, WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out Outcome
	if err := run.Get(ctx, &out); err != nil || out.Reason != "completed" {
		t.Fatalf("the loop: %+v %v\n%s", out, err, whereItIs(c, run))
	}
	for _, id := range ids {
		if n := mergedTimes(t, repo, base, id); n != 1 {
			t.Errorf("atom %s merged %d times into %s", id, n, base)
		}
	}
	for _, id := range []string{"A", "B", "C", "D"} {
		if got := gitT(t, repo, "show", base+":"+id+".txt"); got != id {
			t.Errorf("%s:%s.txt = %q", base, id, got)
		}
	}
	if left := slices.DeleteFunc(remoteBranches(t, repo), func(b string) bool { return b == base }); len(left) > 0 {
		t.Errorf("atom branches left on the remote: %v", left)
	}
	batches := mergeBatches(t, c, id)
	var merged []string
	biggest := 0
	for _, b := range batches {
		merged = append(merged, b...)
		biggest = max(biggest, len(b))
	}
	// Six first attempts, and the re-run of whichever of X and Y merged
	// second, each in exactly one batch; fewer batches than merges.
	if len(merged) != 7 || biggest < 2 || len(batches) >= len(merged) {
		t.Errorf("merge activities: %v", batches)
	}
	rerun := slices.ContainsFunc(merged, func(s string) bool { return strings.HasSuffix(s, "#2") })
	if !rerun || !slices.Contains(merged, "X#1") || !slices.Contains(merged, "Y#1") {
		t.Errorf("X's and Y's merges: %v", batches)
	}
	t.Logf("merge activities: %v", batches)
}
