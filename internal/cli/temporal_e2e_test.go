//go:build temporal && unix

package cli

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/temporaltest"
)

// The README's recipe, as a person runs it: a Temporal dev server, two
// `aot worker` processes, `aot run --engine temporal` in a project whose
// remote the workers reach; Ctrl-C detaches, a second `aot run` reattaches
// and sees the loop to its end. Every process is the aot command itself.
func TestTemporalRecipeWithTwoWorkerProcesses(t *testing.T) {
	start := aotProcesses(t)

	var atoms []state.Atom
	for _, id := range []string{"A", "B", "C", "D"} {
		atoms = append(atoms, state.Atom{ID: id, Description: "write " + id + ".txt"})
	}
	atoms = append(atoms, state.Atom{ID: "E", Description: "sum up", DependsOn: []string{"A", "B", "C", "D"}})
	root, remote, ws, sf := temporalProject(t, "five files", "test -f A.txt && test -f B.txt && test -f C.txt && test -f D.txt && test -f E.txt", 4, atoms...)

	// Each agent notes where it ran (its worktree is in its worker's
	// cache), and holds until the gate exists (at most a minute).
	ran := filepath.Join(root, "ran.log")
	gate := filepath.Join(root, "gate")
	agent := `echo "$AOT_ATOM_ID $PWD" >> ` + ran + `; i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; ` +
		`echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "wrote '"$AOT_ATOM_ID"'"}'`

	const queue = "recipe"
	endpoints := workerProcesses(t, start, ws, root, queue, "--agent", "exec", "--agent-command", agent)
	scrapes := func() (all string, each []string) {
		for _, e := range endpoints {
			_, text := temporaltest.Get(t, e+"/metrics")
			all, each = all+text, append(each, text)
		}
		return all, each
	}

	// aot run attaches; once four agents run, Ctrl-C detaches.
	run1, out1 := start("aot run", ws, "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec", "--agent-command", agent)
	until(t, "four agents run", 90*time.Second, func() bool {
		data, _ := os.ReadFile(ran)
		return strings.Count(string(data), "\n") >= 4
	})
	// Both workers say they are healthy and count their running attempts.
	all, each := scrapes()
	for i, e := range endpoints {
		if code, body := temporaltest.Get(t, e+"/healthz"); code != http.StatusOK || !strings.Contains(body, "ok: polling") || !strings.Contains(body, "build id ") {
			t.Errorf("%s/healthz: %d %s", e, code, body)
		}
		if n := counted(each[i], `aot_attempts_started_total{role="worker"}`); n < 1 {
			t.Errorf("worker %s counts %v attempts started:\n%s", e, n, each[i])
		}
	}
	if n := counted(all, `aot_activities_running{activity="aot.Attempt"}`); n != 4 {
		t.Errorf("the workers count %v attempts running, want 4", n)
	}
	run1.Process.Signal(syscall.SIGINT)
	if err := run1.Wait(); run1.ProcessState.ExitCode() != 3 {
		t.Fatalf("aot run after Ctrl-C: %v (want exit 3)\n%s", err, out1)
	}
	if !strings.Contains(out1.String(), "detached (SIGINT (Ctrl-C) received; exit 3): the loop goes on as workflow") {
		t.Errorf("aot run did not say it detached:\n%s", out1)
	}

	// The loop goes on; a second aot run reattaches and ends with it.
	run2, out2 := start("aot run again", ws, "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec", "--agent-command", agent)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- run2.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("the reattached aot run: %v\n%s", err, out2)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the loop did not end within 3 minutes:\n%s", out2)
	}
	for _, want := range []string{"completed (completed)", "atom_finish  E  worker  attempt 1  ok", "verify  ", "stop  "} {
		if !strings.Contains(out2.String(), want) {
			t.Errorf("the reattached aot run did not show %q:\n%s", want, out2)
		}
	}

	// The workers counted the loop's attempts, merges and verification,
	// beside the Temporal SDK's own metrics.
	all, each = scrapes()
	for name, want := range map[string]float64{
		`aot_attempts_started_total{role="worker"}`:               5,
		`aot_attempts_finished_total{outcome="ok",role="worker"}`: 5,
		`aot_merges_total{outcome="merged"}`:                      5,
		`aot_merges_total{outcome="conflict"}`:                    0,
	} {
		if got := counted(all, name); got != want {
			t.Errorf("the workers count %s %v, want %v", name, got, want)
		}
	}
	if n := counted(all, `aot_verifications_total{outcome="passed"}`); n < 1 {
		t.Errorf("the workers count %v verifications passed", n)
	}
	for i, text := range each {
		if counted(text, "temporal_request{") == 0 || counted(text, "temporal_activity_execution_latency_seconds_count{") == 0 {
			t.Errorf("worker %s serves no SDK metrics:\n%s", endpoints[i], text)
		}
	}
	// Atoms ran on both workers.
	data, _ := os.ReadFile(ran)
	on := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		for _, w := range []string{"w1", "w2"} {
			if strings.Contains(line, "cache-"+w) {
				on[w] = true
			}
		}
	}
	if !on["w1"] || !on["w2"] {
		t.Errorf("the atoms did not land on both workers:\n%s", data)
	}
	// The local state and journal say what the workflow did.
	final, err := state.NewStore(sf).Read()
	if err != nil || final.Control.Status != state.ControlCompleted {
		t.Fatalf("local state: %v %+v\nfirst run:\n%s\nsecond run:\n%s", err, final.Control, out1, out2)
	}
	evs, err := journal.Read(journal.PathFor(sf))
	if err != nil {
		t.Fatal(err)
	}
	finished := map[string]int{}
	for _, ev := range evs {
		if ev.Type == journal.AtomFinish && ev.Role == "worker" && ev.OK != nil && *ev.OK {
			finished[ev.Atom]++
		}
		if ev.Type == journal.RunStart || ev.Type == journal.Stop {
			finished[ev.Type]++
		}
	}
	for _, id := range []string{"A", "B", "C", "D", "E", journal.RunStart, journal.Stop} {
		if finished[id] != 1 {
			t.Errorf("the local journal has %s %d times", id, finished[id])
		}
	}
	// Every atom is merged once into the integration branch on the remote.
	_, rest, ok := strings.Cut(out1.String(), "the loop goes on as workflow ")
	id, _, _ := strings.Cut(rest, ";")
	if !ok || id == "" {
		t.Fatalf("no workflow id in:\n%s", out1)
	}
	merged := gitIn(t, remote, "log", "--first-parent", "--format=%B", "aot/"+id+"/integration")
	for _, id := range []string{"A", "B", "C", "D", "E"} {
		if n := strings.Count(merged, "Aot-Atom: "+id+"\n"); n != 1 {
			t.Errorf("atom %s merged %d times:\n%s", id, n, merged)
		}
	}
	// aot status reads it (through the workflow) like a local loop.
	st, stOut := start("aot status", ws, "status")
	if err := st.Wait(); err != nil || !strings.Contains(stOut.String(), "completed") {
		t.Errorf("aot status: %v\n%s", err, stOut)
	}
}

// startFunc starts the aot command (the test binary) in dir with args; the
// process is interrupted, and waited for, when the test ends.
type startFunc func(name, dir string, args ...string) (*exec.Cmd, *lockedBuffer)

// aotProcesses makes the test binary the aot command of a person whose
// Temporal service is a dev server of the test's, and returns how to start
// it.
func aotProcesses(t *testing.T) startFunc {
	return aotProcessesOf(t, func(bin string) {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		// The test binary acts as aot under this name (TestMain).
		if err := os.Symlink(self, filepath.Join(bin, "aot")); err != nil {
			t.Fatal(err)
		}
	})
}

// aotProcessesOf is aotProcesses with the aot command that install puts
// in the folder bin.
func aotProcessesOf(t *testing.T, install func(bin string)) startFunc {
	addr := temporaltest.DevServer(t)
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	install(bin)
	aot := filepath.Join(bin, "aot")
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, "cache"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, "gitconfig"),
		"TEMPORAL_ADDRESS="+addr, "TEMPORAL_NAMESPACE=default", "NO_COLOR=1", envStateFile+"=")
	return func(name, dir string, args ...string) (*exec.Cmd, *lockedBuffer) {
		t.Helper()
		out := &lockedBuffer{}
		cmd := exec.Command(aot, args...)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Signal(os.Interrupt)
				done := make(chan struct{})
				go func() { cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					cmd.Process.Kill()
					t.Errorf("%s did not stop within 20s of Ctrl-C:\n%s", name, out)
				}
			}
		})
		return cmd, out
	}
}

// workerProcesses starts two aot worker processes on queue as
// docs/TEMPORAL.md starts them, w1 by its systemd unit's ExecStart and w2
// by its Dockerfile's CMD, with what is the test's own in place of the
// documented values: the queue, caches in root, identities, a free
// loopback port for the metrics, a short grace, and extra (their agents).
// It waits until both poll, and returns where each serves /metrics and
// /healthz.
func workerProcesses(t *testing.T, start startFunc, dir, root, queue string, extra ...string) (endpoints []string) {
	t.Helper()
	for i, doc := range docWorkers(t) {
		w := "w" + strconv.Itoa(i+1)
		args := append(doc.args, "--task-queue", queue, "--cache", filepath.Join(root, "cache-"+w), "--identity", w,
			"--metrics-addr", "127.0.0.1:0", "--grace", "1s", "--max-activities", "2")
		args = append(args, extra...)
		_, out := start(w, dir, args...)
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), "metrics on http://"); time.Sleep(100 * time.Millisecond) {
			// aot's errors (a flag it does not know) start with "aot: ".
			if failed := strings.HasPrefix(out.String(), "aot: ") || strings.Contains(out.String(), "\naot: "); failed || time.Now().After(deadline) {
				t.Fatalf("%s, started as the %s starts it (aot %s), does not poll and serve its metrics:\n%s",
					w, doc.from, strings.Join(args, " "), out)
			}
		}
		endpoints = append(endpoints, workerEndpoints(t, out.String()))
	}
	return endpoints
}

// Two clones of one remote, each with a loop of its own goal, run on
// Temporal at once from the command line: each has its own workflow and
// its own result on its own branch, neither's state file is touched by the
// other, no atom's branch is left on the remote. A second aot run of a
// clone reattaches to its own workflow; aot run --attach ID in another
// clone follows that workflow on purpose.
func TestTemporalTwoClonesWithDifferentGoalsFromTheCLI(t *testing.T) {
	start := aotProcesses(t)
	root, remote, ws1, sf1 := temporalProject(t, "files A and B", "test -f A.txt && test -f B.txt", 2,
		state.Atom{ID: "A", Description: "write A.txt"}, state.Atom{ID: "B", Description: "write B.txt"})
	ws2 := filepath.Join(root, "second")
	gitIn(t, root, "clone", "-q", remote, ws2)
	sf2 := filepath.Join(ws2, ".claude", "aot-loop-state.md")
	s := state.New(state.Objective{Goal: "files P and Q", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c",
		BaseCase:    &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "test -f P.txt && test -f Q.txt"}},
		Constraints: state.Constraints{MaxIterations: 40, MaxParallelAgents: 2, MaxStallCount: 5}},
		[]state.Atom{{ID: "P", Description: "write P.txt"}, {ID: "Q", Description: "write Q.txt"}}, "files P and Q")
	if err := state.NewStore(sf2).Create(s, true); err != nil {
		t.Fatal(err)
	}
	gitIn(t, ws2, "add", "-A")
	gitIn(t, ws2, "commit", "-q", "-m", "another loop")

	const queue = "two-clones"
	gate := filepath.Join(root, "gate")
	agent := `i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; ` +
		`echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "wrote '"$AOT_ATOM_ID"'"}'`
	workerProcesses(t, start, ws1, root, queue, "--agent", "exec", "--agent-command", agent)
	run := func(name, dir string, args ...string) (*exec.Cmd, *lockedBuffer) {
		return start(name, dir, append([]string{"run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec", "--agent-command", agent}, args...)...)
	}
	started := func(out *lockedBuffer) string {
		t.Helper()
		until(t, "the workflow starts", 60*time.Second, func() bool { return strings.Contains(out.String(), "started workflow ") })
		_, rest, _ := strings.Cut(out.String(), "started workflow ")
		id, _, _ := strings.Cut(rest, " ")
		return id
	}
	run1, out1 := run("aot run 1", ws1)
	run2, out2 := run("aot run 2", ws2)
	id1, id2 := started(out1), started(out2)
	if id1 == id2 {
		t.Fatalf("two clones share workflow %s", id1)
	}
	// A second aot run in the first clone reattaches to its workflow.
	again, outAgain := run("aot run 1 again", ws1)
	until(t, "the second aot run reattaches", 60*time.Second, func() bool { return strings.Contains(outAgain.String(), "reattached to workflow "+id1) })

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd *exec.Cmd
		out *lockedBuffer
	}{{run1, out1}, {run2, out2}, {again, outAgain}} {
		waited := make(chan error, 1)
		go func() { waited <- c.cmd.Wait() }()
		select {
		case err := <-waited:
			if err != nil || !strings.Contains(c.out.String(), "completed (completed)") {
				t.Errorf("aot run: %v\n%s", err, c.out)
			}
		case <-time.After(3 * time.Minute):
			t.Fatalf("the loop did not end within 3 minutes:\n%s", c.out)
		}
	}
	for _, c := range []struct {
		sf, goal, id string
		own, other   []string
	}{{sf1, "files A and B", id1, []string{"A", "B"}, []string{"P", "Q"}}, {sf2, "files P and Q", id2, []string{"P", "Q"}, []string{"A", "B"}}} {
		got, err := state.NewStore(c.sf).Read()
		if err != nil || got.Objective.Goal != c.goal || got.Control.Status != state.ControlCompleted {
			t.Errorf("%s: %v, goal %q, status %s", c.sf, err, got.Objective.Goal, got.Control.Status)
		}
		files := gitIn(t, remote, "ls-tree", "--name-only", "aot/"+c.id+"/integration")
		for _, id := range c.own {
			if !strings.Contains(files, id+".txt") {
				t.Errorf("aot/%s/integration lacks %s.txt:\n%s", c.id, id, files)
			}
		}
		for _, id := range c.other {
			if strings.Contains(files, id+".txt") {
				t.Errorf("aot/%s/integration holds the other loop's %s.txt", c.id, id)
			}
		}
	}
	// Each completed loop's work landed on its own clone's branch.
	for _, c := range []struct{ ws, file string }{{ws1, "A.txt"}, {ws2, "P.txt"}} {
		if _, err := os.Stat(filepath.Join(c.ws, c.file)); err != nil {
			t.Errorf("the loop's work did not land in %s: %v", c.ws, err)
		}
	}
	if !strings.Contains(out1.String()+outAgain.String(), "fast-forwarded onto main") {
		t.Errorf("aot run did not say where the work landed:\n%s", out1)
	}
	branches := strings.Fields(gitIn(t, remote, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/aot/"))
	if len(branches) != 2 {
		t.Errorf("branches on the remote: %q, want the two integration branches alone", branches)
	}

	// aot run --attach ID in the second clone follows the first loop's
	// workflow on purpose: its end, and its state.
	att, outAtt := start("aot run --attach", ws2, "run", "--engine", "temporal", "--task-queue", queue, "--attach", id1)
	if err := att.Wait(); err != nil || !strings.Contains(outAtt.String(), "attached to workflow "+id1+" on purpose") || !strings.Contains(outAtt.String(), "completed (completed)") {
		t.Errorf("aot run --attach %s: %v\n%s", id1, err, outAtt)
	}
	if got, err := state.NewStore(sf2).Read(); err != nil || got.Objective.Goal != "files A and B" {
		t.Errorf("after --attach, the second clone's state file: %v %q", err, got.Objective.Goal)
	}
	if _, err := os.Stat(filepath.Join(ws2, "A.txt")); err == nil {
		t.Error("the attached loop's work landed in the clone that only followed it")
	}
	// --attach without the Temporal engine is a usage error.
	bad, outBad := start("aot run --attach, local", ws2, "run", "--attach", id1)
	if err := bad.Wait(); err == nil || !strings.Contains(outBad.String(), "--engine temporal") {
		t.Errorf("--attach without --engine temporal: %v\n%s", err, outBad)
	}
}
