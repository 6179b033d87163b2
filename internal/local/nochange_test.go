//go:build unix

package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// honestLiarQuiet is a worker per atom: H writes H.ok and claims it; L
// claims L.ok and writes nothing; Q writes nothing and claims nothing (its
// atom declares expect_changes: false); O writes O.scratch but claims O.ok.
const honestLiarQuiet = `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
case "$AOT_ATOM_ID" in
H) touch H.ok; echo '{"success": true, "summary": "made H.ok", "artifacts": ["H.ok"]}' ;;
L) echo '{"success": true, "summary": "made L.ok", "artifacts": ["L.ok"]}' ;;
Q) echo '{"success": true, "summary": "looked, nothing to change"}' ;;
O) touch O.scratch; echo '{"success": true, "summary": "made O.ok", "artifacts": ["O.ok"]}' ;;
esac`

func TestWhatTheWorkerChangedIsWhatCounts(t *testing.T) {
	quiet := false
	for _, iso := range []string{engine.IsolationNone, engine.IsolationWorktree} {
		t.Run(iso, func(t *testing.T) {
			ids := [][2]string{{"H", ""}, {"L", ""}, {"Q", ""}, {"O", ""}}
			var path, repo string
			if iso == engine.IsolationWorktree {
				path, repo = gitProject(t, ids, "test -f H.ok")
			} else {
				path = project(t, atoms(ids...), func(s *state.State) {
					s.Objective.BaseCase = &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "test -f H.ok"}}
				})
			}
			st := state.NewStore(path)
			if _, err := st.Update(func(s *state.State) error {
				s.Atom("Q").ExpectChanges = &quiet
				s.Objective.Constraints.MaxAttemptsPerAtom = 1
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			ag := &agent.Exec{Command: "sh " + writeScript(t, honestLiarQuiet)}
			runEngine(t, path, ag, func(o *Options) { o.Isolation = iso; o.MaxParallel = 1 })
			s := read(t, path)
			for id, want := range map[string]string{"H": state.StatusResolved, "Q": state.StatusResolved, "L": state.StatusPending, "O": state.StatusPending} {
				if got := s.Atom(id).Status; got != want {
					t.Errorf("%s is %s, want %s", id, got, want)
				}
			}
			kinds := map[string]string{}
			for _, ev := range events(t, path, journal.AtomFinish) {
				if ev.OK != nil && !*ev.OK {
					kinds[ev.Atom], _ = ev.Data["kind"].(string)
				}
			}
			if kinds["L"] != "no_change" || kinds["O"] != "no_change" || kinds["H"] != "" || kinds["Q"] != "" {
				t.Fatalf("failure kinds = %v, want L and O no_change", kinds)
			}
			if b := s.Binding("L"); b != nil {
				t.Fatalf("the liar has a binding: %+v", b)
			}
			if repo != "" {
				// O changed a file it did not claim: judged before its
				// merge, so that file is on no branch, landed or not.
				out, err := exec.Command("git", "-C", repo, "log", "--all", "--name-only", "--format=").CombinedOutput()
				if err != nil {
					t.Fatalf("git log: %v: %s", err, out)
				}
				if strings.Contains(string(out), "O.scratch") || !strings.Contains(string(out), "H.ok") {
					t.Fatalf("files on the repository's branches:\n%s\nwant H.ok and never O.scratch", out)
				}
			}
		})
	}
}

// A check that names a file the worker claimed points at its atom, even
// when the attempt changed other files only (its binding's artifacts are
// the files its merge changed).
func TestAFailingCheckPointsAtWhatTheWorkerClaimed(t *testing.T) {
	path, repo := gitProject(t, [][2]string{{"A", ""}}, "test -s lib.sh")
	// First attempt: writes notes.txt only but claims lib.sh too; after its
	// reopening it writes lib.sh.
	ag := &agent.Exec{Command: "sh " + writeScript(t, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
if [ "$AOT_ATTEMPT" -gt 1 ]; then echo 'echo hi' > lib.sh; else echo more >> notes.txt; fi
echo '{"success": true, "summary": "wrote lib.sh", "artifacts": ["lib.sh", "notes.txt"]}'`)}
	out := runEngine(t, path, ag, func(o *Options) { o.Isolation = engine.IsolationWorktree })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	var reopened bool
	for _, ev := range events(t, path, journal.AtomReset) {
		reopened = reopened || ev.Atom == "A" && strings.HasPrefix(ev.Reason, "reopened")
	}
	if !reopened {
		t.Fatal("A was not reopened by the failing check naming lib.sh, which it claimed")
	}
	if data, err := os.ReadFile(filepath.Join(repo, "lib.sh")); err != nil || len(data) == 0 {
		t.Fatalf("lib.sh did not land: %v", err)
	}
}

// refusingAgent is a CLI backend's view of a run whose write was refused:
// the refusal shows as activity, then the agent says it succeeded.
type refusingAgent struct{}

func (refusingAgent) Run(ctx context.Context, t agent.Task) (agent.Result, error) {
	agent.ActivityFunc(ctx)(agent.Activity{Tool: "Write", Detail: "/elsewhere/out.txt", Refused: true, Why: "not granted"})
	return agent.Result{Success: true, Summary: "wrote out.txt", Artifacts: []string{"out.txt"}}, nil
}

func TestARefusedWriteIsJournaledAndIsTheFailure(t *testing.T) {
	path := project(t, atoms([2]string{"A", ""}), func(s *state.State) { s.Objective.Constraints.MaxAttemptsPerAtom = 1 })
	var progress strings.Builder
	runEngine(t, path, refusingAgent{}, func(o *Options) { o.Isolation = engine.IsolationNone; o.Progress = &progress })
	denied := events(t, path, journal.PermissionDenied)
	if len(denied) != 1 || denied[0].Atom != "A" || denied[0].Data["tool"] != "Write" || denied[0].Data["path"] != "/elsewhere/out.txt" {
		t.Fatalf("permission_denied events = %+v", denied)
	}
	var kind string
	for _, ev := range events(t, path, journal.AtomFinish) {
		if ev.Atom == "A" && ev.OK != nil && !*ev.OK {
			kind, _ = ev.Data["kind"].(string)
		}
	}
	if kind != string(agent.KindPermission) {
		t.Fatalf("the attempt failed with kind %q, want permission_denied", kind)
	}
	if !strings.Contains(progress.String(), "A Write refused: /elsewhere/out.txt: not granted") {
		t.Fatalf("no progress line says the write was refused:\n%s", progress.String())
	}
}

// The liar fails, so the atom that depends on it never starts and nothing
// of either reaches the person's branch.
func TestALiarsDependentNeverRunsAndNothingLands(t *testing.T) {
	path, repo := gitProject(t, [][2]string{{"A", ""}, {"B", "A"}}, "test -f A.ok && test -f B.ok")
	if _, err := state.NewStore(path).Update(func(s *state.State) error {
		s.Objective.Constraints.MaxAttemptsPerAtom = 2
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ag := &agent.Exec{Command: "sh " + writeScript(t, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
[ "$AOT_ATOM_ID" = B ] && touch B.ok
echo "{\"success\": true, \"summary\": \"made $AOT_ATOM_ID.ok\", \"artifacts\": [\"$AOT_ATOM_ID.ok\"]}"`)}
	out := runEngine(t, path, ag, func(o *Options) { o.Isolation = engine.IsolationWorktree })
	if out.Reason == engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	for _, ev := range events(t, path, journal.AtomStart) {
		if ev.Atom == "B" {
			t.Fatal("B started although the atom it depends on never did its work")
		}
	}
	if files := git(t, repo, "ls-tree", "-r", "--name-only", "main"); strings.Contains(files, ".ok") {
		t.Fatalf("work landed on main:\n%s", files)
	}
}
