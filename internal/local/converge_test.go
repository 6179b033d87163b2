//go:build unix

package local

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// These tests drive the engine with real agent processes: a shell script per
// test, run by the exec backend, that logs each call to calls.log as
// "ROLE ATOM ATTEMPT" and decides from AOT_ATOM_ID and AOT_ATTEMPT.

// scriptProject writes a project whose agent is the shell script body and
// whose base case is base.
func scriptProject(t *testing.T, ids []string, base string, edit func(*state.State)) (path, dir string, ag *agent.Exec) {
	t.Helper()
	var list []state.Atom
	for _, id := range ids {
		list = append(list, state.Atom{ID: id, Description: "make " + id, DependsOn: []string{}})
	}
	path = project(t, list, func(s *state.State) {
		s.Objective.BaseCase = &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: base}}
		if edit != nil {
			edit(s)
		}
	})
	dir = engine.ProjectRoot(path)
	return path, dir, nil
}

func execAgent(dir, body string) *agent.Exec {
	script := filepath.Join(dir, "agent.sh")
	pre := `echo "$AOT_ROLE $AOT_ATOM_ID $AOT_ATTEMPT" >> calls.log` + "\n"
	if err := os.WriteFile(script, []byte(pre+body), 0o755); err != nil {
		panic(err)
	}
	return &agent.Exec{Command: "sh " + script}
}

type call struct {
	role, atom string
	attempt    int
}

func calls(t *testing.T, dir string) []call {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "calls.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c call
		if _, err := fmt.Sscanf(sc.Text(), "%s %s %d", &c.role, &c.atom, &c.attempt); err == nil {
			out = append(out, c)
		}
	}
	return out
}

func workerCalls(cs []call) []call {
	var out []call
	for _, c := range cs {
		if c.role == "worker" {
			out = append(out, c)
		}
	}
	return out
}

func events(t *testing.T, path, typ string) []journal.Event {
	t.Helper()
	all, err := journal.Read(journal.PathFor(path))
	if err != nil {
		t.Fatal(err)
	}
	var out []journal.Event
	for _, e := range all {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// The worker answer of the scripts below: success writes ATOM.ok.
const succeed = `touch "$AOT_ATOM_ID.ok"; echo '{"success": true, "feasible": true, "passed": true, "atoms": [], "summary": "did it"}'`
const refuse = `echo '{"success": false, "feasible": true, "passed": false, "atoms": [], "summary": "could not"}'`

func TestAFailedAtomWaitsWhileUntriedAtomsRun(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A", "B", "C", "D"}, "test -f A.ok && test -f B.ok && test -f C.ok && test -f D.ok", nil)
	ag := execAgent(dir, `
[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
if [ "$AOT_ATOM_ID" = A ] && [ "$AOT_ATTEMPT" -le 2 ]; then `+refuse+`; exit 0; fi
`+succeed)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 1 })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	w := workerCalls(calls(t, dir))
	// A's retry comes after every untried atom has had its first attempt.
	var order []string
	for _, c := range w {
		order = append(order, fmt.Sprintf("%s%d", c.atom, c.attempt))
	}
	if got := strings.Join(order, " "); !strings.HasPrefix(got, "A1 B1 C1 D1 A2") {
		t.Fatalf("worker order = %s", got)
	}
	if b := events(t, path, journal.Backoff); len(b) != 2 || b[0].Atom != "A" || b[1].DurationMS <= b[0].DurationMS {
		t.Fatalf("backoff events = %+v (want two for A, growing)", b)
	}
}

func TestParallelFirstFailuresAreNotAStall(t *testing.T) {
	// Four atoms, three slots, default max_stall_count (3): every atom fails
	// its first attempt and succeeds on its second. Counted per result this
	// was three stalls and a stop; per sweep it is one.
	path, dir, _ := scriptProject(t, []string{"A", "B", "C", "D"}, "test -f A.ok && test -f B.ok && test -f C.ok && test -f D.ok", nil)
	ag := execAgent(dir, `
[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
[ "$AOT_ATTEMPT" = 1 ] && { `+refuse+`; exit 0; }
`+succeed)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 3 })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	// One sweep without progress at most: when a quick retry succeeds before
	// the last first attempt ends, that sweep already made progress.
	st := events(t, path, journal.Stall)
	if len(st) > 1 {
		t.Fatalf("stall events = %d, want at most 1 (one sweep without progress)", len(st))
	}
}

func TestASweepWithoutProgressIsAStall(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A", "B"}, "test -f A.ok && test -f B.ok", func(s *state.State) {
		s.Objective.Constraints.MaxStallCount = 2
		s.Objective.Constraints.MaxAttemptsPerAtom = 50
	})
	ag := execAgent(dir, `
[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
`+refuse)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 2 })
	if out.Reason != engine.Stalled || out.ExitCode != 5 {
		t.Fatalf("outcome = %+v", out)
	}
	if !strings.Contains(out.Message, "stall: 2 sweeps in a row without progress") || !strings.Contains(out.Message, "the base case fails: base_case:") {
		t.Fatalf("message = %q", out.Message)
	}
	// Two sweeps: each atom tried at least twice (a quick atom may be
	// retried while a slow one still runs its sweep's attempt, so a loaded
	// machine sees more), and two stalls, far from max_attempts_per_atom.
	n := map[string]int{}
	for _, c := range workerCalls(calls(t, dir)) {
		n[c.atom]++
	}
	if n["A"] < 2 || n["B"] < 2 || n["A"]+n["B"] > 20 {
		t.Fatalf("worker attempts = %v, want 2 each or a few more", n)
	}
	if st := events(t, path, journal.Stall); len(st) != 2 {
		t.Fatalf("stall events = %d, want 2", len(st))
	}
}

func TestABoundReachedWhileTheBaseCasePassesCompletes(t *testing.T) {
	// The files are already there; the agent keeps failing. Whatever bound
	// stops it, aot checks the base case first and completes.
	path, dir, _ := scriptProject(t, []string{"A"}, "test -f ready.txt", func(s *state.State) {
		s.Objective.Constraints.MaxStallCount = 1
	})
	if err := os.WriteFile(filepath.Join(dir, "ready.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ag := execAgent(dir, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
`+refuse)
	out := runEngine(t, path, ag, nil)
	if out.Reason != engine.Completed || out.ExitCode != 0 || !strings.Contains(out.Message, "checked before stopping on stall") {
		t.Fatalf("outcome = %+v", out)
	}
	if v := events(t, path, journal.Verify); len(v) == 0 || !*v[len(v)-1].OK {
		t.Fatalf("verify events = %+v", v)
	}
}

func TestAFastFailureDoesNotThrowAwayASlowAtom(t *testing.T) {
	// F fails at once, every time; S needs a second. Counted per result the
	// loop stopped on F's third failure and killed S.
	path, dir, _ := scriptProject(t, []string{"F", "S"}, "test -f F.ok && test -f S.ok", func(s *state.State) {
		s.Objective.Constraints.MaxStallCount = 1
		s.Objective.Constraints.MaxAttemptsPerAtom = 1000
	})
	ag := execAgent(dir, `
[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
[ "$AOT_ATOM_ID" = F ] && { `+refuse+`; exit 0; }
sleep 1
`+succeed)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 2 })
	if out.Reason != engine.Stalled {
		t.Fatalf("outcome = %+v", out)
	}
	s := read(t, path)
	if s.Atom("S").Status != state.StatusResolved {
		t.Fatalf("S = %s: its work was thrown away", s.Atom("S").Status)
	}
}

func TestUsageOfACrashedAttemptIsCounted(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A"}, "test -f A.ok", func(s *state.State) {
		s.Objective.Constraints.MaxTokens = 100
	})
	// Every call reports two model calls (60 tokens) and then dies by SIGKILL
	// before answering.
	ag := execAgent(dir, `
echo '{"input_tokens": 20, "output_tokens": 10, "cost_usd": 0.01}' >> "$AOT_USAGE_FILE"
echo '{"input_tokens": 20, "output_tokens": 10, "cost_usd": 0.01}' >> "$AOT_USAGE_FILE"
kill -9 $$`)
	out := runEngine(t, path, ag, nil)
	if out.Reason != engine.Budget {
		t.Fatalf("outcome = %+v", out)
	}
	n := len(calls(t, dir))
	if n != 2 || out.Usage.InputTokens+out.Usage.OutputTokens != 120 || out.UnknownUsage != 0 {
		t.Fatalf("calls %d, usage %+v unknown %d: want 2 calls, 120 tokens, none unknown", n, out.Usage, out.UnknownUsage)
	}
	// An agent that reports nothing is counted as unknown, not as free.
	path2, dir2, _ := scriptProject(t, []string{"A"}, "test -f A.ok", nil)
	out = runEngine(t, path2, execAgent(dir2, `[ "$AOT_ROLE" = worker ] && kill -9 $$; echo '{"feasible": true, "atoms": []}'`), func(o *Options) { o.MaxIterations = 1 })
	if out.UnknownUsage == 0 {
		t.Fatalf("unknown usage not counted: %+v", out)
	}
}

func TestBoundsHoldAcrossRuns(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A", "B", "C", "D", "E"}, "test -f E.ok", func(s *state.State) {
		s.Objective.Constraints.MaxTokens = 1000
	})
	ag := execAgent(dir, `echo '{"input_tokens": 300, "output_tokens": 0}' >> "$AOT_USAGE_FILE"
`+succeed)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 1 })
	if out.Reason != engine.Budget || out.Usage.InputTokens != 1200 {
		t.Fatalf("first run = %+v", out)
	}
	before := len(calls(t, dir))
	out = runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 1 })
	if out.Reason != engine.Budget || out.Usage.InputTokens != 1200 || len(calls(t, dir)) != before {
		t.Fatalf("second run = %+v after %d calls, now %d: the budget is the loop's, not the run's", out, before, len(calls(t, dir)))
	}
	if !strings.Contains(out.Message, "aot redirect --reason R --max-tokens N") {
		t.Fatalf("message does not say how to raise the bound: %q", out.Message)
	}
}

func TestMaxIterationsFlagCountsThisRun(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A", "B"}, "test -f done", func(s *state.State) {
		s.Objective.Constraints.MaxStallCount = 100
		s.Objective.Constraints.MaxAttemptsPerAtom = 100
	})
	ag := execAgent(dir, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
`+refuse)
	for run := 1; run <= 2; run++ {
		out := runEngine(t, path, ag, func(o *Options) { o.MaxIterations = 2 })
		if out.Reason != engine.MaxIterations || out.Iterations != 2*run {
			t.Fatalf("run %d: %+v (want %d iterations in all)", run, out, 2*run)
		}
	}
}

func TestARunAfterAStallStartsANewStallWindow(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A"}, "test -f A.ok", func(s *state.State) {
		s.Objective.Constraints.MaxStallCount = 1
	})
	ag := execAgent(dir, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
[ -f go ] && { `+succeed+`; exit 0; }
`+refuse)
	if out := runEngine(t, path, ag, nil); out.Reason != engine.Stalled {
		t.Fatalf("first run = %+v", out)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runEngine(t, path, ag, nil); out.Reason != engine.Completed {
		t.Fatalf("second run = %+v: it should try again, not stop on the old stall count", out)
	}
}

func TestUsageLimitWithRetryAtWaitsThenGoesOn(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A", "B"}, "test -f A.ok && test -f B.ok", nil)
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	ag := execAgent(dir, `[ "$AOT_ATOM_ID" = A ] && [ ! -f limited ] && { touch limited; echo '{"usage_limit": true, "retry_at": "`+at+`", "summary": "quota"}'; exit 0; }
`+succeed)
	start := time.Now()
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 1 })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	retry, _ := time.Parse(time.RFC3339, at)
	if time.Now().Before(retry) || time.Since(start) > 20*time.Second {
		t.Fatalf("completed at %s, before the quota's reset %s", time.Now().Format(time.RFC3339), at)
	}
	if len(events(t, path, journal.QuotaWait)) != 1 || len(events(t, path, journal.QuotaResume)) != 1 {
		t.Fatal("no quota_wait / quota_resume in the journal")
	}
	if s := read(t, path); s.Atom("A").Attempts != 0 {
		t.Fatalf("A was charged %d attempts for the provider's quota", s.Atom("A").Attempts)
	}
}

func TestAStopDuringAQuotaWaitStopsAtOnce(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"A"}, "test -f A.ok", nil)
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	ag := execAgent(dir, `echo '{"usage_limit": true, "retry_at": "`+at+`"}'`)
	go func() {
		for i := 0; i < 200; i++ {
			time.Sleep(20 * time.Millisecond)
			if evs, _ := journal.Read(journal.PathFor(path)); len(evs) > 0 && strings.Contains(fmt.Sprint(evs), journal.QuotaWait) {
				_, _ = state.NewStore(path).Update(func(s *state.State) error {
					r := "enough"
					s.Control.StopRequested, s.Control.StopReason = true, &r
					return nil
				})
				return
			}
		}
	}()
	start := time.Now()
	out := runEngine(t, path, ag, nil)
	if out.Reason != engine.ManualStop || time.Since(start) > 10*time.Second {
		t.Fatalf("outcome = %+v after %s", out, time.Since(start))
	}
	// --no-wait keeps the old stop.
	path2, dir2, _ := scriptProject(t, []string{"A"}, "test -f A.ok", nil)
	out = runEngine(t, path2, execAgent(dir2, `echo '{"usage_limit": true, "retry_at": "`+at+`"}'`), func(o *Options) { o.NoWait = true })
	if out.Reason != engine.UsageLimit || out.ExitCode != 10 || !strings.Contains(out.Message, "--no-wait") {
		t.Fatalf("--no-wait outcome = %+v", out)
	}
}

func TestAnAtomOutOfAttemptsIsParkedWhileTheRestFinishes(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"BAD", "B", "C"}, "test -f B.ok && test -f C.ok && test -f BAD.ok", func(s *state.State) {
		s.Objective.Constraints.MaxAttemptsPerAtom = 2
	})
	ag := execAgent(dir, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
[ "$AOT_ATOM_ID" = BAD ] && { `+refuse+`; exit 0; }
`+succeed)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 1 })
	if out.Reason != engine.MaxAttempts || out.ExitCode != 9 || !strings.Contains(out.Message, "BAD failed 2 times") {
		t.Fatalf("outcome = %+v", out)
	}
	s := read(t, path)
	if s.Atom("B").Status != state.StatusResolved || s.Atom("C").Status != state.StatusResolved {
		t.Fatal("the rest of the graph did not finish")
	}
	// The same state stops for the same reason, without running BAD again.
	before := len(workerCalls(calls(t, dir)))
	if out := runEngine(t, path, ag, nil); out.Reason != engine.MaxAttempts || len(workerCalls(calls(t, dir))) != before {
		t.Fatalf("second run = %+v", out)
	}
}

func TestOversizedAnswersKeepTheWorkNotTheStateFileSize(t *testing.T) {
	path, dir, _ := scriptProject(t, []string{"HUGE", "YES"}, "false", func(s *state.State) {
		s.Objective.Constraints.MaxAttemptsPerAtom = 1
	})
	// HUGE answers with a 2 MB summary: the work is kept, the summary cut
	// with a marker. YES prints without end: a failed attempt.
	ag := execAgent(dir, `[ "$AOT_ATOM_ID" = YES ] && exec yes
printf '{"success": true, "summary": "'; head -c 2000000 /dev/zero | tr '\0' x; echo '"}'`)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 2 })
	if out.Reason != engine.MaxAttempts {
		t.Fatalf("outcome = %+v", out)
	}
	s := read(t, path)
	if a := s.Atom("HUGE"); a.Status != state.StatusResolved {
		t.Fatalf("HUGE is %s (%q); want resolved", a.Status, a.LastFailure)
	}
	sum := s.Binding("HUGE").Summary
	if len(sum) > agent.MaxSummary || !strings.HasSuffix(sum, "[aot: the summary is 2000000 bytes; the state file keeps the first "+strconv.Itoa(strings.Count(sum, "x"))+", the attempt's log has it whole]") {
		t.Fatalf("HUGE's summary: %d bytes, ending %q", len(sum), sum[max(0, len(sum)-120):])
	}
	if got := s.Atom("YES").LastFailure; !strings.Contains(got, "16 MiB") {
		t.Fatalf("YES last_failure = %q", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > 64<<10 {
		t.Fatalf("state file size %v, %v", fi.Size(), err)
	}
}

func TestWorkAnAgentLiedAboutIsReopenedByTheFailingCheck(t *testing.T) {
	// A lies on its first attempt (claims A.ok without writing it); B, when
	// done, breaks C's file. The checks name the files: the atoms behind the
	// failing checks are reopened and redone, and the loop completes.
	path, dir, _ := scriptProject(t, []string{"A", "B", "C"}, "", func(s *state.State) {
		s.Objective.BaseCase = &state.BaseCase{HasChecklist: true, Checklist: []state.ChecklistItem{
			{Item: "a file", Check: &state.Check{Type: state.CheckCommand, Value: "test -f A.ok"}},
			{Item: "B", Check: &state.Check{Type: state.CheckCommand, Value: "test -f B.ok"}},
			{Item: "c file", Check: &state.Check{Type: state.CheckFile, Value: "C.ok"}},
		}}
		s.Atom("B").DependsOn = []string{"C"} // B runs after C, and breaks it
	})
	ag := execAgent(dir, `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "passed": true, "atoms": []}'; exit 0; }
claim='{"success": true, "summary": "done", "artifacts": ["'$AOT_ATOM_ID'.ok"]}'
if [ "$AOT_ATOM_ID" = A ] && [ ! -f lied ]; then touch lied; echo "$claim"; exit 0; fi
if [ "$AOT_ATOM_ID" = B ] && [ ! -f broke ]; then touch broke; sleep 0.2; rm -f C.ok; fi
touch "$AOT_ATOM_ID.ok"; echo "$claim"`)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 1 })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	var reopened []string
	for _, r := range events(t, path, journal.AtomReset) {
		if strings.HasPrefix(r.Reason, "reopened:") {
			reopened = append(reopened, r.Atom)
		}
	}
	if strings.Join(reopened, ",") != "A,C" {
		t.Fatalf("reopened %v, want A and C", reopened)
	}
	// Reopening is not charged as an attempt (a lie and a later atom breaking
	// the work look the same from the checks); it is bounded on its own.
	if s := read(t, path); s.Atom("A").Attempts != 0 || s.Atom("C").Attempts != 0 {
		t.Fatalf("attempts A %d C %d", s.Atom("A").Attempts, s.Atom("C").Attempts)
	}
}

func TestReopeningIsBounded(t *testing.T) {
	// A always lies: it is reopened max_attempts_per_atom times, then the
	// loop stops naming the failing check.
	path, dir, _ := scriptProject(t, []string{"A"}, "test -f A.ok", func(s *state.State) {
		s.Objective.Constraints.MaxAttemptsPerAtom = 2
		s.Objective.Constraints.MaxStallCount = 50
		s.Objective.Constraints.MaxIterations = 50
	})
	ag := execAgent(dir, `echo '{"success": true, "feasible": true, "passed": true, "atoms": [], "artifacts": ["A.ok"]}'`)
	out := runEngine(t, path, ag, nil)
	if out.Reason == engine.Completed || !strings.Contains(out.Message, "the base case fails: base_case:") {
		t.Fatalf("outcome = %+v", out)
	}
	if n := len(workerCalls(calls(t, dir))); n != 3 {
		t.Fatalf("worker calls = %d, want 3 (the first and two reopens)", n)
	}
}

func TestCrashesAloneAreRetriedNotCountedAsStalls(t *testing.T) {
	// Crashes say nothing about whether the work can be done: a sweep of
	// only crashes is not a stall; the attempts bound still holds, and no
	// probe or planner is asked about a crash.
	path, dir, _ := scriptProject(t, []string{"A"}, "test -f A.ok", func(s *state.State) {
		s.Objective.Constraints.MaxStallCount = 1
		s.Objective.Constraints.MaxAttemptsPerAtom = 3
	})
	out := runEngine(t, path, execAgent(dir, `kill -9 $$`), nil)
	if out.Reason != engine.MaxAttempts {
		t.Fatalf("outcome = %+v", out)
	}
	cs := calls(t, dir)
	if len(cs) != 3 || len(workerCalls(cs)) != 3 {
		t.Fatalf("calls = %v, want 3 worker attempts and nothing else", cs)
	}
}

func TestAFailureOnABrokenDependencyRedoesTheDependencyFirst(t *testing.T) {
	// C's success breaks A's work; B needs A and C. B's failure makes aot
	// run the checks, find A's check failing and redo A, then B once more:
	// no probe, no planner, no stall.
	path := project(t, []state.Atom{
		{ID: "A", Description: "make A", DependsOn: []string{}},
		{ID: "C", Description: "make C", DependsOn: []string{}},
		{ID: "B", Description: "make B", DependsOn: []string{"A", "C"}},
	}, func(s *state.State) {
		s.Objective.BaseCase = &state.BaseCase{HasChecklist: true, Checklist: []state.ChecklistItem{
			{Item: "A", Check: &state.Check{Type: state.CheckCommand, Value: "grep -q good A.ok"}},
			{Item: "C", Check: &state.Check{Type: state.CheckFile, Value: "C.ok"}},
			{Item: "B", Check: &state.Check{Type: state.CheckFile, Value: "B.ok"}},
		}}
	})
	dir := engine.ProjectRoot(path)
	ag := execAgent(dir, `
[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
case "$AOT_ATOM_ID" in
A) echo good > A.ok ;;
C) touch C.ok; [ ! -f broke ] && { touch broke; echo bad > A.ok; } ;;
B) grep -q good A.ok || { echo '{"success": false, "summary": "A does not work"}'; exit 0; }; touch B.ok ;;
esac
echo '{"success": true, "summary": "done"}'`)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 1 })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	var order []string
	for _, c := range calls(t, dir) {
		order = append(order, fmt.Sprintf("%s:%s%d", c.role, c.atom, c.attempt))
	}
	got := strings.Join(order, " ")
	if !strings.HasSuffix(got, "worker:B1 worker:A1 worker:B2") && !strings.HasSuffix(got, "worker:B1 worker:A2 worker:B2") {
		t.Fatalf("calls = %s; want B's failure, A redone, B again", got)
	}
	if strings.Contains(got, "probe") || strings.Contains(got, "planner") || len(events(t, path, journal.Stall)) != 0 {
		t.Fatalf("calls = %s, stalls = %d", got, len(events(t, path, journal.Stall)))
	}
}

func TestSweepsRedoingBrokenWorkAreNotChargedToMaxIterations(t *testing.T) {
	// C's first success breaks A's work; B needs A and C, D needs B. The
	// sweep that redoes A is repair: with max_iterations 1 the loop still
	// gets to D and completes.
	path := project(t, []state.Atom{
		{ID: "A", Description: "make A", DependsOn: []string{}},
		{ID: "C", Description: "make C", DependsOn: []string{}},
		{ID: "B", Description: "make B", DependsOn: []string{"A", "C"}},
		{ID: "D", Description: "make D", DependsOn: []string{"B"}},
	}, func(s *state.State) {
		s.Objective.Constraints.MaxIterations = 1
		s.Objective.BaseCase = &state.BaseCase{HasChecklist: true, Checklist: []state.ChecklistItem{
			{Item: "A", Check: &state.Check{Type: state.CheckCommand, Value: "grep -q good A.ok"}},
			{Item: "C", Check: &state.Check{Type: state.CheckFile, Value: "C.ok"}},
			{Item: "B", Check: &state.Check{Type: state.CheckFile, Value: "B.ok"}},
			{Item: "D", Check: &state.Check{Type: state.CheckFile, Value: "D.ok"}},
		}}
	})
	dir := engine.ProjectRoot(path)
	ag := execAgent(dir, `
[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
case "$AOT_ATOM_ID" in
A) echo good > A.ok ;;
C) touch C.ok; [ ! -f broke ] && { touch broke; echo bad > A.ok; } ;;
B) grep -q good A.ok || { echo '{"success": false, "summary": "A does not work"}'; exit 0; }; touch B.ok ;;
D) touch D.ok ;;
esac
echo '{"success": true, "summary": "done"}'`)
	out := runEngine(t, path, ag, func(o *Options) { o.MaxParallel = 1 })
	if out.Reason != engine.Completed {
		t.Fatalf("outcome = %+v", out)
	}
	repairs := 0
	for _, ev := range events(t, path, journal.Iteration) {
		if r, _ := ev.Data["repair"].(bool); r {
			repairs++
		}
	}
	if repairs == 0 || out.Iterations-repairs > 1 {
		t.Fatalf("%d iterations, %d of them repair", out.Iterations, repairs)
	}
	if out.Iterations <= 1 {
		t.Fatalf("only %d iterations: the test needs more than max_iterations to mean anything", out.Iterations)
	}
}
