//go:build unix

package durable

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// Every loop has its own names on Temporal: its workflow and its branches
// on the remote come from its loop id and where it runs, never from the
// remote and the state file's path alone.

// cloneWithLoop is a clone of repo whose state file (committed) holds a
// loop with its own goal, one atom per id writing <id>.txt, and loopID
// when it is not "" (as a state file committed with its id is cloned).
func cloneWithLoop(t *testing.T, repo, goal, loopID string, c state.Constraints, ids ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "work")
	gitT(t, filepath.Dir(dir), "clone", "-q", repo, dir)
	var atoms []state.Atom
	var checks []string
	for _, id := range ids {
		atoms = append(atoms, state.Atom{ID: id, Description: "write " + id + ".txt"})
		checks = append(checks, "test -f "+id+".txt")
	}
	if c.MaxParallelAgents == 0 {
		c.MaxParallelAgents = 2
	}
	s := state.New(state.Objective{Goal: goal, BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c",
		BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: strings.Join(checks, " && ")}}, Constraints: c}, atoms, goal)
	s.Control.LoopID = loopID
	sf := filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := state.NewStore(sf).Create(s, false); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", goal)
	return sf
}

// remoteBranches lists the branches of repo under aot/.
func remoteBranches(t *testing.T, repo string) []string {
	t.Helper()
	out := gitT(t, repo, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/aot/")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func TestTwoClonesWithDifferentGoalsRunApartOnOneRemote(t *testing.T) {
	const queue = "apart"
	c := twoWorkers(t, queue)
	repo, _ := newRemote(t, map[string]string{})

	// Both state files carry the same loop id, as when one was committed
	// with it and cloned; their goals and atoms differ.
	const sameID = "20261125-same0000"
	sf1 := cloneWithLoop(t, repo, "files A and B", sameID, state.Constraints{}, "A", "B")
	sf2 := cloneWithLoop(t, repo, "files P and Q", sameID, state.Constraints{}, "P", "Q")
	gate := filepath.Join(t.TempDir(), "go")
	opts := func(sf string) StartOptions {
		return StartOptions{StateFile: sf, TaskQueue: queue, Settings: engine.Settings{AgentTimeout: 2 * time.Minute}, Agent: AgentChoice{Agent: "exec",
			Command: writesItsFile(`i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; `)}}
	}

	// Both start at once.
	var m [2]Marker
	var errs [2]error
	var attached [2]bool
	var wg sync.WaitGroup
	for i, sf := range []string{sf1, sf2} {
		wg.Go(func() { m[i], attached[i], errs[i] = Start(context.Background(), c, opts(sf)) })
	}
	wg.Wait()
	for i := range m {
		if errs[i] != nil || attached[i] {
			t.Fatalf("start %d: %+v attached %v: %v", i+1, m[i], attached[i], errs[i])
		}
	}
	if m[0].WorkflowID == m[1].WorkflowID || m[0].Base == m[1].Base {
		t.Fatalf("two clones share a workflow or a branch: %+v %+v", m[0], m[1])
	}
	for _, mk := range m {
		if !ofLoop(mk.WorkflowID, sameID) || mk.Base != "aot/"+mk.WorkflowID+"/integration" {
			t.Errorf("marker %+v: not named after the loop id %s", mk, sameID)
		}
	}

	// A resume of the first clone reattaches to its own workflow.
	again, att, err := Start(context.Background(), c, opts(sf1))
	if err != nil || !att || again.WorkflowID != m[0].WorkflowID {
		t.Fatalf("the first clone's second start: %+v attached %v: %v", again, att, err)
	}
	// A third clone attaches to the first loop's workflow on purpose.
	sf3 := cloneWithLoop(t, repo, "something else", "", state.Constraints{}, "Z")
	on, att, err := Start(context.Background(), c, StartOptions{StateFile: sf3, TaskQueue: queue, Attach: m[0].WorkflowID})
	if err != nil || !att || on.WorkflowID != m[0].WorkflowID {
		t.Fatalf("--attach: %+v attached %v: %v", on, att, err)
	}
	if _, _, err := Start(context.Background(), c, StartOptions{StateFile: sf3, TaskQueue: queue, Attach: "aot-no-such-workflow"}); err == nil {
		t.Error("--attach to a workflow that does not exist was accepted")
	}

	os.WriteFile(gate, nil, 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i, sf := range []string{sf1, sf2} {
		wg.Go(func() {
			out, err := AttachWith(ctx, c, m[i], sf, AttachOptions{Every: 100 * time.Millisecond})
			if err != nil || out == nil || out.Reason != string(engine.Completed) {
				t.Errorf("loop %d: %+v %v", i+1, out, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Each state file has its own loop, completed; each result is on its
	// own branch, with its own work alone, each atom merged once.
	for i, tc := range []struct {
		sf, goal   string
		own, other []string
	}{{sf1, "files A and B", []string{"A", "B"}, []string{"P", "Q"}}, {sf2, "files P and Q", []string{"P", "Q"}, []string{"A", "B"}}} {
		s, err := state.NewStore(tc.sf).Read()
		if err != nil {
			t.Fatal(err)
		}
		if s.Objective.Goal != tc.goal || s.Control.Status != state.ControlCompleted || len(s.Atoms) != 2 || s.Atoms[0].ID != tc.own[0] {
			t.Errorf("clone %d's state file: goal %q, status %s, atoms %+v", i+1, s.Objective.Goal, s.Control.Status, s.Atoms)
		}
		for _, id := range tc.own {
			if n := mergedTimes(t, repo, m[i].Base, id); n != 1 {
				t.Errorf("atom %s merged %d times into %s", id, n, m[i].Base)
			}
		}
		files := gitT(t, repo, "ls-tree", "--name-only", m[i].Base)
		for _, id := range tc.other {
			if strings.Contains(files, id+".txt") {
				t.Errorf("%s holds the other loop's %s.txt:\n%s", m[i].Base, id, files)
			}
		}
	}
	// No atom's branch is left on the remote: the two results alone.
	want := []string{m[0].Base, m[1].Base}
	slices.Sort(want)
	if got := remoteBranches(t, repo); !slices.Equal(got, want) {
		t.Errorf("branches on the remote %q, want %q", got, want)
	}

	// The attached third clone follows the first loop: its state file
	// now says that loop's goal.
	out, err := AttachWith(ctx, c, on, sf3, AttachOptions{Every: 100 * time.Millisecond})
	if err != nil || out == nil || out.Reason != string(engine.Completed) {
		t.Fatalf("the attached clone: %+v %v", out, err)
	}
	if s, err := state.NewStore(sf3).Read(); err != nil || s.Objective.Goal != "files A and B" {
		t.Errorf("the attached clone's state file: %v %+v", err, s.Objective)
	}
}

// A start finds the loop's integration branch on the remote when an
// earlier workflow of the same loop made it: the loop goes on from its
// tip, and the branch is not moved. Without one, it is created from HEAD.
func TestIntegrationBranchIsNeverForced(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	work := filepath.Join(t.TempDir(), "work")
	gitT(t, filepath.Dir(work), "clone", "-q", repo, work)
	ctx := context.Background()
	got, err := integrationBase(ctx, work, repo, "aot/x/integration", seed)
	if err != nil || got != seed || branchOf(t, repo, "aot/x/integration") != seed {
		t.Fatalf("created: %q %v", got, err)
	}
	writeFile(t, filepath.Join(work, "later.txt"), "later\n")
	gitT(t, work, "add", "-A")
	gitT(t, work, "commit", "-q", "-m", "later")
	head := gitT(t, work, "rev-parse", "HEAD")
	got, err = integrationBase(ctx, work, repo, "aot/x/integration", head)
	if err != nil || got != seed || branchOf(t, repo, "aot/x/integration") != seed {
		t.Fatalf("a second start moved or ignored the loop's branch: base %q, branch at %s: %v", got, branchOf(t, repo, "aot/x/integration"), err)
	}
}

// The exec rows of the conformance matrix on the Temporal path with two
// workers: a worker that writes (its work merged once), a liar (claims a
// file, changes nothing: never merged as work), a hang (timed out, its
// process tree killed).
func TestExecConformanceOnTemporalWithTwoWorkers(t *testing.T) {
	const queue = "conformance"
	c := twoWorkers(t, queue)
	repo, _ := newRemote(t, map[string]string{})
	pids := filepath.Join(t.TempDir(), "pids")
	script := `case "$AOT_ROLE:$AOT_ATOM_ID" in
worker:W) echo W > W.txt; echo '{"success": true, "summary": "wrote W", "artifacts": ["W.txt"]}';;
worker:L) echo '{"success": true, "summary": "wrote L", "artifacts": ["L.txt"]}';;
worker:O) echo scratch > O.scratch; echo '{"success": true, "summary": "wrote O", "artifacts": ["O.txt"]}';;
worker:H) sleep 300 & echo $! >> ` + pids + `; echo $$ >> ` + pids + `; wait;;
*) echo '{"feasible": false, "findings": "no", "atoms": []}';;
esac`
	sf := cloneWithLoop(t, repo, "three rows", "", state.Constraints{MaxParallelAgents: 4, MaxAttemptsPerAtom: 1, MaxIterations: 3, MaxStallCount: 2}, "W", "L", "O", "H")
	m, _, err := Start(context.Background(), c, StartOptions{StateFile: sf, TaskQueue: queue, Settings: engine.Settings{AgentTimeout: 3 * time.Second},
		Agent: AgentChoice{Agent: "exec", Command: script}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := AttachWith(ctx, c, m, sf, AttachOptions{Every: 100 * time.Millisecond})
	if err != nil || out == nil {
		t.Fatalf("the loop did not end: %+v %v", out, err)
	}
	if out.Reason == string(engine.Completed) {
		t.Errorf("a loop whose liar and hang did nothing completed: %+v", out)
	}

	// The writer's work is merged once; the liar's never.
	if n := mergedTimes(t, repo, m.Base, "W"); n != 1 {
		t.Errorf("W merged %d times", n)
	}
	if n := mergedTimes(t, repo, m.Base, "L"); n != 0 {
		t.Errorf("the liar was merged %d times", n)
	}
	// O changed a file it did not claim and none it claimed: judged
	// before its merge, its change is on no remote branch.
	if n := mergedTimes(t, repo, m.Base, "O"); n != 0 {
		t.Errorf("the worker that changed none of its claims was merged %d times", n)
	}
	evs, err := journal.Read(journal.PathFor(sf))
	if err != nil {
		t.Fatal(err)
	}
	var liar *journal.Event
	hang := false
	kinds := map[string]string{}
	for i, ev := range evs {
		if ev.Type == journal.Merge && ev.Atom == "L" {
			liar = &evs[i]
		}
		if ev.Type == journal.AtomFinish && ev.Atom == "H" && ev.Role == string(agent.Worker) && ev.Data["kind"] == string(agent.KindTimeout) {
			hang = true
		}
		if ev.Type == journal.AtomFinish && (ev.Atom == "L" || ev.Atom == "O") && ev.Role == string(agent.Worker) {
			kinds[ev.Atom], _ = ev.Data["kind"].(string)
		}
	}
	if liar == nil || !strings.Contains(strings.Join(anyStrings(liar.Data["claimed_but_unchanged"]), ","), "L.txt") {
		t.Errorf("the liar's claim is not recorded as unchanged: %+v", liar)
	}
	if !hang {
		t.Error("the hang did not finish as a timeout")
	}
	if kinds["L"] != string(agent.KindNoChange) || kinds["O"] != string(agent.KindNoChange) {
		t.Errorf("the workers' failure kinds are %v, want L and O no_change", kinds)
	}
	// The hang's process tree is gone.
	data, _ := os.ReadFile(pids)
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		if pid > 0 && alive(pid) {
			t.Errorf("process %d of the hung agent survived", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if len(strings.Fields(string(data))) == 0 {
		t.Error("the hung agent never ran")
	}
	if got := remoteBranches(t, repo); !slices.Equal(got, []string{m.Base}) {
		t.Errorf("branches on the remote %q, want the integration branch alone", got)
	}
}

// anyStrings reads a JSON list of strings decoded into an any.
func anyStrings(v any) []string {
	var out []string
	switch l := v.(type) {
	case []string:
		out = l
	case []any:
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
