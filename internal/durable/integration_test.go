//go:build unix

package durable

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// The loop on a real Temporal dev server, with real workers, git and a
// bare repository as the remote.

// fourAtoms is a loop of four atoms (C after A, D after B and C) whose
// base case wants each atom's file.
func fourAtoms() []byte {
	atoms := []state.Atom{
		{ID: "A", Description: "write A.txt"},
		{ID: "B", Description: "write B.txt"},
		{ID: "C", Description: "write C.txt", DependsOn: []string{"A"}},
		{ID: "D", Description: "write D.txt", DependsOn: []string{"B", "C"}},
	}
	check := &state.Check{Type: state.CheckCommand, Value: "test -f A.txt && test -f B.txt && test -f C.txt && test -f D.txt"}
	s := state.New(state.Objective{Goal: "four files", BaseCase: &state.BaseCase{Legacy: check},
		Constraints: state.Constraints{MaxIterations: 40, MaxParallelAgents: 3, MaxStallCount: 5}}, atoms, "four files")
	s.Control.Status = state.ControlRunning
	return state.Marshal(s)
}

// writesItsFile is the exec agent of the loops below: it writes the
// atom's file; before that it runs hold (a shell snippet), if any.
func writesItsFile(hold string) string {
	return hold + `echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "wrote '"$AOT_ATOM_ID"'"}'`
}

// integration is the loop's integration branch, named as aot run names
// it (beside the attempts' aot/<id>/<atom>-<n>).
func integration(id string) string { return "aot/" + id + "/integration" }

// startLoop starts the four-atom loop on repo's integration branch.
func startLoop(t *testing.T, c client.Client, queue, repo, seed, command string) client.WorkflowRun {
	t.Helper()
	id := "it-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	gitT(t, repo, "branch", integration(id), seed)
	in := LoopInput{Settings: engine.Settings{AgentTimeout: 2 * time.Minute}, State: fourAtoms(), Repo: repo, Base: integration(id), BaseCommit: seed,
		Agent: AgentChoice{Agent: "exec", Command: command}}
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue}, WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// inProcessWorker runs RunWorker until the test ends.
func inProcessWorker(t *testing.T, addr, queue, name string) {
	t.Helper()
	c := dialDev(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunWorker(ctx, WorkerOptions{Client: c, TaskQueue: queue, CacheDir: t.TempDir(), Identity: name,
			NewAgent: execAgents, Heartbeat: time.Second, Grace: time.Second})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker %s: %v", name, err)
		}
	})
}

// landedOnce checks that the loop completed and that base holds every
// atom's file and merges each atom exactly once.
func landedOnce(t *testing.T, c client.Client, run client.WorkflowRun, repo, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("the loop: %v\n%s", err, whereItIs(c, run))
	}
	if out.Reason != string(engine.Completed) || out.ExitCode != 0 {
		t.Fatalf("outcome %+v, want completed", out)
	}
	for _, atom := range []string{"A", "B", "C", "D"} {
		if got := gitT(t, repo, "show", base+":"+atom+".txt"); got != atom {
			t.Errorf("%s:%s.txt = %q", base, atom, got)
		}
		if n := mergedTimes(t, repo, base, atom); n != 1 {
			t.Errorf("atom %s merged %d times into %s", atom, n, base)
		}
	}
}

// mergedTimes counts the commits on branch's first-parent line that merged
// atom (workspace's trailer Aot-Atom names it).
func mergedTimes(t *testing.T, repo, branch, atom string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(gitT(t, repo, "log", "--first-parent", "--format=%B", branch), "\n") {
		if line == "Aot-Atom: "+atom {
			n++
		}
	}
	return n
}

// twoWorkers starts a dev server and two in-process workers polling
// queue; it returns a client of the server.
func twoWorkers(t *testing.T, queue string) client.Client {
	t.Helper()
	addr := devServer(t)
	inProcessWorker(t, addr, queue, "w1")
	inProcessWorker(t, addr, queue, "w2")
	return dialDev(t, addr)
}

// refuseAtomBranches makes the bare repo refuse every push that makes or
// moves a branch under aot/ other than a loop's integration branch: a
// loop that still completes pushed no attempt's work on its own.
func refuseAtomBranches(t *testing.T, repo string) {
	t.Helper()
	hook := `#!/bin/sh
while read old new ref; do
	case "$ref" in
	refs/heads/aot/*/integration) ;;
	refs/heads/aot/*) [ "$new" = 0000000000000000000000000000000000000000 ] || { echo "refused: $ref" >&2; exit 1; } ;;
	esac
done
`
	if err := os.WriteFile(filepath.Join(repo, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Each worker merges the work its attempts did where they did it: no
// attempt's branch is ever pushed.
func TestLoopOnTwoWorkers(t *testing.T) {
	const queue = "two-workers"
	c := twoWorkers(t, queue)
	repo, seed := newRemote(t, map[string]string{})
	refuseAtomBranches(t, repo)
	start := time.Now()
	run := startLoop(t, c, queue, repo, seed, writesItsFile(""))
	landedOnce(t, c, run, repo, integration(run.GetID()))
	t.Logf("the loop took %s", time.Since(start).Round(time.Millisecond))
}

func TestKilledWorkersAttemptIsFinishedByAnother(t *testing.T) {
	addr := devServer(t)
	repo, seed := newRemote(t, map[string]string{})
	const queue = "killed-worker"
	marks := t.TempDir()
	// Atom A's first attempt holds until its worker is killed; every
	// other attempt (A's retry included) writes its file at once.
	hold := fmt.Sprintf(`if [ "$AOT_ATOM_ID" = A ] && mkdir %s/A 2>/dev/null; then echo $$ > %s/A.pid; sleep 300; fi; `, marks, marks)

	doomed, exited := doomedWorker(t, addr, queue)
	start := time.Now()
	c := dialDev(t, addr)
	run := startLoop(t, c, queue, repo, seed, writesItsFile(hold))
	var agentPid int
	for deadline := time.Now().Add(time.Minute); agentPid == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the doomed worker never started atom A's agent")
		}
		data, _ := os.ReadFile(filepath.Join(marks, "A.pid"))
		agentPid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	}
	// The agent's process group outlives a SIGKILLed worker only until
	// the test ends.
	t.Cleanup(func() { syscall.Kill(-agentPid, syscall.SIGKILL) })
	if err := syscall.Kill(-doomed.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	t.Logf("killed the worker running A's agent after %s", time.Since(start).Round(time.Millisecond))

	inProcessWorker(t, addr, queue, "survivor")
	landedOnce(t, c, run, repo, integration(run.GetID()))
	t.Logf("the loop took %s", time.Since(start).Round(time.Millisecond))

}

// whereItIs tells a loop that did not end: its status and the activities
// it waits for.
func whereItIs(c client.Client, run client.WorkflowRun) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	if v, err := c.QueryWorkflow(ctx, run.GetID(), "", QueryStatus); err == nil {
		var st Status
		if v.Get(&st) == nil {
			fmt.Fprintf(&b, "running %+v, iteration %d, paused %v\nstate:\n%s\n", st.Running, st.Iteration, st.Paused, st.State)
		}
	} else {
		fmt.Fprintf(&b, "query: %v\n", err)
	}
	if d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), ""); err == nil {
		for _, p := range d.GetPendingActivities() {
			fmt.Fprintf(&b, "pending %s: state %s, attempt %d, last failure %v, worker %s\n", p.GetActivityType().GetName(), p.GetState(), p.GetAttempt(), p.GetLastFailure(), p.GetLastWorkerIdentity())
		}
	}
	return b.String()
}
