//go:build unix

package local

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// startEngine runs the engine in the background; wait returns its outcome.
func startEngine(t *testing.T, path string, opts Options) (wait func() engine.Outcome) {
	t.Helper()
	opts.StateFile = path
	if opts.PollInterval == 0 {
		opts.PollInterval = 10 * time.Millisecond
	}
	opts.RetryBackoff, opts.MaxBackoff = time.Millisecond, 20*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan engine.Outcome, 1)
	go func() {
		out, err := Run(ctx, opts)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- out
	}()
	t.Cleanup(cancel)
	return func() engine.Outcome {
		select {
		case out := <-done:
			return out
		case <-time.After(60 * time.Second):
			t.Fatal("the engine did not stop")
			return engine.Outcome{}
		}
	}
}

// waitFile waits until name exists in dir.
func waitFile(t *testing.T, dir, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", name)
}

// The agent of these tests: a worker of X waits for the file go-X, then
// succeeds; started-X.N marks its start.
const gated = `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
touch "started-$AOT_ATOM_ID.$AOT_ATTEMPT"
n=0; while [ ! -f "go-$AOT_ATOM_ID" ] && [ $n -lt 1500 ]; do sleep 0.02; n=$((n+1)); done
touch "$AOT_ATOM_ID.ok"; echo '{"success": true, "summary": "did it"}'`

func TestARedirectStopsOnlyWhatItInvalidates(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A", "B"}, "test -f A.ok && test -f B.ok && test -f N.ok", nil)
	ag := execAgent(dir, gated)
	wait := startEngine(t, path, Options{Settings: engine.Settings{MaxParallel: 3}, Agent: ag})
	waitFile(t, dir, "started-A.1")
	waitFile(t, dir, "started-B.1")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A refused redirect stops nothing.
	err := SendRedirect(ctx, path, engine.Change{Reason: "bad", AddAtoms: []state.Atom{{ID: "Z", Description: "z", DependsOn: []string{"NOPE"}}}})
	if err == nil {
		t.Fatal("a redirect to an unknown dependency was accepted")
	}
	// Adding an atom and a bound stops nothing; the new atom starts at once.
	three := 3
	if err := SendRedirect(ctx, path, engine.Change{Reason: "more", AddAtoms: []state.Atom{{ID: "N", Description: "n", DependsOn: []string{}}}, MaxParallelAgents: &three}); err != nil {
		t.Fatal(err)
	}
	waitFile(t, dir, "started-N.1")
	// Removing B stops B only.
	if err := SendRedirect(ctx, path, engine.Change{Reason: "no B", RemoveAtoms: []string{"B"}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"A", "N", "B"} {
		if err := os.WriteFile(filepath.Join(dir, "go-"+id), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := wait()
	// B is gone and its file never written: the base case (which still asks
	// for B.ok) fails; what matters is which agents were stopped.
	for _, f := range []string{"started-A.2", "started-N.2"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Fatalf("%s: an agent the redirects did not invalidate was restarted (outcome %+v)", f, out)
		}
	}
	resets := events(t, path, journal.AtomReset)
	var killed []string
	for _, r := range resets {
		if strings.HasPrefix(r.Reason, "redirect:") {
			killed = append(killed, r.Atom)
		}
	}
	if strings.Join(killed, ",") != "B" {
		t.Fatalf("agents stopped by redirects: %v, want only B", killed)
	}
	s := read(t, path)
	if s.Atom("A").Status != state.StatusResolved || s.Atom("N").Status != state.StatusResolved || s.Atom("B") != nil {
		t.Fatalf("atoms after: A=%v N=%v B=%v", s.Atom("A"), s.Atom("N"), s.Atom("B"))
	}
}

func TestAHandEditDuringARunIsTakenAsARedirect(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A", "B"}, "test -f A.ok && test -f B.ok", nil)
	ag := execAgent(dir, gated)
	wait := startEngine(t, path, Options{Settings: engine.Settings{MaxParallel: 2}, Agent: ag, FlushInterval: 10 * time.Millisecond})
	waitFile(t, dir, "started-A.1")
	waitFile(t, dir, "started-B.1")
	// A person changes the goal in an editor: every agent restarts on the new goal.
	edit(t, path, func(text string) string {
		return regexp.MustCompile(`(?m)^(\s*goal:).*$`).ReplaceAllString(text, "${1} a better goal")
	})
	waitEvent(t, path, journal.HandEdit, 1)
	// An agent empties the state file: it is written back from memory (or
	// the engine's own write, racing the truncation, replaces it).
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, path)
	// A broken edit is refused, the person's version kept beside the file.
	// (An edit saved in the very instant of an engine write can be replaced
	// by it; then the person saves again, as the test does.)
	for try := 0; ; try++ {
		edit(t, path, func(text string) string { return strings.Replace(text, "atoms:", "atoms: [", 1) })
		if kept, _ := filepath.Glob(path + ".rejected-*"); len(kept) > 0 {
			break
		}
		waitReadable(t, path)
		if kept, _ := filepath.Glob(path + ".rejected-*"); len(kept) > 0 || try == 20 {
			break
		}
	}
	for _, id := range []string{"A", "B"} {
		if err := os.WriteFile(filepath.Join(dir, "go-"+id), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out := wait(); out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	s := read(t, path)
	if s.Objective.Goal != "a better goal" {
		t.Fatalf("the hand edit of the goal was reverted: %q", s.Objective.Goal)
	}
	kept, _ := filepath.Glob(path + ".rejected-*")
	if len(kept) != 1 {
		t.Fatalf("rejected versions kept: %v", kept)
	}
	// The goal change restarted both agents.
	n := 0
	for _, r := range events(t, path, journal.AtomReset) {
		if strings.Contains(r.Reason, "hand edit") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("agents stopped by the goal's hand edit: %d, want 2", n)
	}
	hand := events(t, path, journal.HandEdit)
	if len(hand) < 2 || !*hand[0].OK || *hand[len(hand)-1].OK {
		t.Fatalf("hand_edit events = %+v", hand)
	}
}

func edit(t *testing.T, path string, fn func(string) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Like most editors: write a new file, then rename it over the old one.
	tmp := path + ".edit"
	if err := os.WriteFile(tmp, []byte(fn(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitEvent waits until the journal holds n events of a type.
func waitEvent(t *testing.T, path, typ string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		all, _ := journal.Read(journal.PathFor(path))
		got := 0
		for _, e := range all {
			if e.Type == typ {
				got++
			}
		}
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	data, _ := os.ReadFile(journal.PathFor(path))
	cur, _ := os.ReadFile(path)
	t.Fatalf("the journal did not reach %d %s events:\n%s\nstate file:\n%s", n, typ, data, cur)
}

// waitReadable waits until the state file reads as a valid state again.
func waitReadable(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := state.NewStore(path).Read(); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the state file was not written back")
}
