package durable

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/google/go-cmp/cmp"
)

// The client side of aot run --engine temporal against a real dev server
// and two workers: start, detach, reattach, the local state file kept in
// step, and a stop mid-run.

// clientProject is a clone of repo holding the four-atom loop's state file
// (committed, so the workers see the same project).
func clientProject(t *testing.T, repo string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "work")
	gitT(t, filepath.Dir(dir), "clone", "-q", repo, dir)
	s, err := state.Parse(fourAtoms())
	if err != nil {
		t.Fatal(err)
	}
	s.Control.Status = state.ControlPending
	sf := filepath.Join(dir, ".claude", "aot-loop-state.md")
	s.Objective.BackgroundIntent, s.Objective.Deliverables, s.Objective.DefinitionOfDone = "b", "d", "c"
	if err := state.NewStore(sf).Create(s, false); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "the loop")
	return sf
}

func TestAotRunOnTemporalDetachesReattachesAndProjects(t *testing.T) {
	const queue = "client"
	c := twoWorkers(t, queue)
	repo, _ := newRemote(t, map[string]string{})
	sf := clientProject(t, repo)
	// The agents wait for a file in the test's folder until it exists.
	gate := filepath.Join(t.TempDir(), "go")
	opts := StartOptions{StateFile: sf, TaskQueue: queue, Agent: AgentChoice{Agent: "exec",
		Command: writesItsFile(`i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; `)},
		Settings: engine.Settings{AgentTimeout: 2 * time.Minute}}

	m, attached, err := Start(context.Background(), c, opts)
	if err != nil || attached {
		t.Fatalf("Start: %+v %v %v", m, attached, err)
	}
	if !strings.HasPrefix(m.WorkflowID, "aot-") || m.Base != "aot/"+m.WorkflowID+"/integration" {
		t.Errorf("marker %+v", m)
	}
	if got, ok := ReadMarker(sf); !ok || got.WorkflowID != m.WorkflowID {
		t.Fatalf("marker on disk: %+v %v", got, ok)
	}
	// Attached until the workers run A and B, then Ctrl-C: a detach.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			if st, err := Query(ctx, c, m); err == nil && len(st.Running) == 2 {
				cancel()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	out, err := AttachWith(ctx, c, m, sf, AttachOptions{Every: 100 * time.Millisecond})
	if err != nil || out != nil {
		t.Fatalf("detach: %+v %v", out, err)
	}
	// The loop goes on without the client; a second start reattaches.
	m2, attached, err := Start(context.Background(), c, opts)
	if err != nil || !attached || m2.WorkflowID != m.WorkflowID {
		t.Fatalf("reattach: %+v %v %v", m2, attached, err)
	}
	os.WriteFile(gate, nil, 0o644)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel2()
	var shown []journal.Event
	out, err = AttachWith(ctx2, c, m2, sf, AttachOptions{Every: 100 * time.Millisecond, Event: func(ev journal.Event) { shown = append(shown, ev) }})
	if err != nil || out == nil || out.Reason != string(engine.Completed) {
		t.Fatalf("outcome %+v %v", out, err)
	}
	// The local journal has the workflow's events, each once, across the
	// detach and the reattach; the second attach showed the rest.
	evs, err := journal.Read(journal.PathFor(sf))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, ev := range evs {
		if ev.Type == journal.AtomFinish && ev.Role == string(agent.Worker) {
			count[ev.Atom]++
		}
		if ev.Type == journal.RunStart || ev.Type == journal.Stop {
			count[ev.Type]++
		}
	}
	if diff := cmp.Diff(map[string]int{"A": 1, "B": 1, "C": 1, "D": 1, journal.RunStart: 1, journal.Stop: 1}, count); diff != "" {
		t.Errorf("the local journal's events (-want +got):\n%s", diff)
	}
	if len(shown) == 0 || shown[len(shown)-1].Type != journal.Stop {
		t.Errorf("the attached client was not shown the loop's end: %d events", len(shown))
	}
	// The local state file says what the workflow did.
	s, err := state.NewStore(sf).Read()
	if err != nil {
		t.Fatal(err)
	}
	if s.Control.Status != state.ControlCompleted {
		t.Errorf("local status %s", s.Control.Status)
	}
	for _, a := range s.Atoms {
		if a.Status != state.StatusResolved || s.Binding(a.ID) == nil {
			t.Errorf("local atom %s: %s", a.ID, a.Status)
		}
	}
	// Every atom's work is on the integration branch, merged once.
	// The work lands on the clone's branch, as a local run's does.
	l, err := Land(context.Background(), sf, m2)
	if err != nil || !l.Landed {
		t.Fatalf("landing: %+v %v", l, err)
	}
	work := filepath.Dir(filepath.Dir(sf))
	for _, atom := range []string{"A", "B", "C", "D"} {
		if data, err := os.ReadFile(filepath.Join(work, atom+".txt")); err != nil || strings.TrimSpace(string(data)) != atom {
			t.Errorf("after the landing, %s.txt in the clone: %q %v", atom, data, err)
		}
	}
	if st := gitT(t, work, "status", "--porcelain", "--untracked-files=no"); strings.Contains(st, ".txt") {
		t.Errorf("the landing left the clone dirty:\n%s", st)
	}
	for _, atom := range []string{"A", "B", "C", "D"} {
		if n := mergedTimes(t, repo, m.Base, atom); n != 1 {
			t.Errorf("atom %s merged %d times:\n%s", atom, n, gitT(t, repo, "log", "--format=%B", m.Base))
		}
	}
}

func TestAotStopCancelsATemporalLoopMidRun(t *testing.T) {
	addr := devServer(t)
	repo, _ := newRemote(t, map[string]string{})
	const queue = "client-stop"
	inProcessWorker(t, addr, queue, "w1")
	c := dialDev(t, addr)
	sf := clientProject(t, repo)
	pidDir := t.TempDir()
	opts := StartOptions{StateFile: sf, TaskQueue: queue, Settings: engine.Settings{AgentTimeout: 2 * time.Minute},
		Agent: AgentChoice{Agent: "exec", Command: `echo $$ > ` + pidDir + `/$AOT_ATOM_ID.pid; exec sleep 120`}}
	m, _, err := Start(context.Background(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stopped := make(chan error, 1)
	var asked time.Time
	go func() {
		for ctx.Err() == nil {
			pids, _ := filepath.Glob(filepath.Join(pidDir, "*.pid"))
			if st, err := Query(ctx, c, m); err == nil && len(st.Running) > 0 && len(pids) > 0 {
				asked = time.Now()
				stopped <- Cancel(ctx, c, m, "enough")
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	out, err := AttachWith(ctx, c, m, sf, AttachOptions{Every: 100 * time.Millisecond})
	if err != nil || out == nil || out.Reason != string(engine.ManualStop) {
		t.Fatalf("outcome %+v %v", out, err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	t.Logf("aot stop to the loop's end: %s", time.Since(asked).Round(time.Millisecond))
	// The agents' processes are gone: the workers killed them.
	pids, _ := filepath.Glob(filepath.Join(pidDir, "*.pid"))
	if len(pids) == 0 {
		t.Fatal("no agent ran")
	}
	for _, p := range pids {
		data, _ := os.ReadFile(p)
		pid := strings.TrimSpace(string(data))
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat("/proc/" + pid); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent %s (pid %s) still alive after the stop", filepath.Base(p), pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	s, _ := state.NewStore(sf).Read()
	if s == nil || s.Control.Status != state.ControlStopped || s.Control.StopReason == nil || *s.Control.StopReason != "manual stop: enough" {
		t.Errorf("local state after the stop: %+v", s)
	}
}

// The projection never loses a change in silence: an edit of the state file
// since the last projection (by hand, or a command meant for a local loop)
// is kept aside and said, and the file says what the workflow has.
func TestProjectKeepsAHandEditAsideAndSaysSo(t *testing.T) {
	sf, s := fourAtomsFile(t)
	status := func(mark string) Status {
		next := state.Clone(s)
		next.Atoms[0].Description = mark
		return Status{State: state.Marshal(next)}
	}
	if err := Project(sf, status("first")); err != nil {
		t.Fatalf("the first projection: %v", err)
	}
	if err := Project(sf, status("second")); err != nil {
		t.Fatalf("a projection over the last one: %v", err)
	}
	if _, err := state.NewStore(sf).Update(func(s *state.State) error { s.Atoms[1].Description = "edited by hand"; return nil }); err != nil {
		t.Fatal(err)
	}
	err := Project(sf, status("third"))
	var he *HandEditError
	if !errors.As(err, &he) || !strings.Contains(err.Error(), "aot redirect") {
		t.Fatalf("a projection over a hand edit: %v", err)
	}
	kept, err := os.ReadFile(he.Kept)
	if err != nil || !strings.Contains(string(kept), "edited by hand") {
		t.Errorf("the edit was not kept in %s: %v", he.Kept, err)
	}
	now, err := state.NewStore(sf).Read()
	if err != nil || now.Atoms[0].Description != "third" || now.Atoms[1].Description == "edited by hand" {
		t.Errorf("the file after the projection: %v %+v", err, now.Atoms[:2])
	}
	if err := Project(sf, status("fourth")); err != nil {
		t.Errorf("the next projection: %v", err)
	}
}
