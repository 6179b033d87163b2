package ccw

import (
	"fmt"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

var t0 = time.Date(2026, 1, 22, 10, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func strp(s string) *string { return &s }

const goTestJSONSample = `{"Time":"2026-01-22T10:01:00Z","Action":"start","Package":"example.com/auth"}
{"Time":"2026-01-22T10:01:00Z","Action":"run","Package":"example.com/auth","Test":"TestLogin"}
{"Time":"2026-01-22T10:01:00Z","Action":"output","Package":"example.com/auth","Test":"TestLogin","Output":"=== RUN   TestLogin\n"}
{"Time":"2026-01-22T10:01:00Z","Action":"output","Package":"example.com/auth","Test":"TestLogin","Output":"--- PASS: TestLogin (0.01s)\n"}
{"Time":"2026-01-22T10:01:00Z","Action":"pass","Package":"example.com/auth","Test":"TestLogin","Elapsed":0.01}
{"Time":"2026-01-22T10:01:00Z","Action":"run","Package":"example.com/auth","Test":"TestLogout"}
{"Time":"2026-01-22T10:01:00Z","Action":"output","Package":"example.com/auth","Test":"TestLogout","Output":"=== RUN   TestLogout\n"}
{"Time":"2026-01-22T10:01:00Z","Action":"output","Package":"example.com/auth","Test":"TestLogout","Output":"    auth_test.go:42: session still open\n"}
{"Time":"2026-01-22T10:01:00Z","Action":"output","Package":"example.com/auth","Test":"TestLogout","Output":"--- FAIL: TestLogout (0.02s)\n"}
{"Time":"2026-01-22T10:01:00Z","Action":"fail","Package":"example.com/auth","Test":"TestLogout","Elapsed":0.02}
{"Time":"2026-01-22T10:01:00Z","Action":"run","Package":"example.com/auth","Test":"TestOAuth"}
{"Time":"2026-01-22T10:01:00Z","Action":"skip","Package":"example.com/auth","Test":"TestOAuth","Elapsed":0}
{"Time":"2026-01-22T10:01:00Z","Action":"output","Package":"example.com/auth","Output":"FAIL\n"}
{"Time":"2026-01-22T10:01:00Z","Action":"output","Package":"example.com/auth","Output":"coverage: 81.2% of statements\n"}
{"Time":"2026-01-22T10:01:00Z","Action":"fail","Package":"example.com/auth","Elapsed":0.05}
`

// fixture is a realistic loop in the middle of its run: a resolved atom, an
// OR group that backtracked, a decomposition under way, a parked atom, and
// a failed verification whose evidence holds go test -json lines.
func fixture() (Meta, *state.State, []journal.Event) {
	m := Meta{ID: "loop-v2-20260122-abc123", Title: "Implement user authentication", Description: "Add login/logout functionality",
		Workspace: "/work/app", StateFile: "/work/app/.claude/aot-loop-state.md", CreatedAt: t0}
	s := state.New(state.Objective{Goal: "login and logout", Constraints: state.Constraints{MaxIterations: 10}}, []state.Atom{
		{ID: "A1", Description: "Create the user model", Status: state.StatusResolved},
		{ID: "A2a", Description: "Sessions in cookies", Status: state.StatusPending, DependsOn: []string{"A1"}, ORGroup: "sessions", Attempts: 1, LastFailure: "crash: exit status 2"},
		{ID: "A2b", Description: "Sessions in JWT", Status: state.StatusResolved, DependsOn: []string{"A1"}, ORGroup: "sessions"},
		{ID: "A3", Description: "Login and logout endpoints", Status: state.StatusPending, DependsOn: []string{"A2a"}},
		{ID: "A3.1", Description: "Login endpoint", Status: state.StatusResolved, DependsOn: []string{"A2a"}},
		{ID: "A3.2", Description: "Logout endpoint", Status: state.StatusInProgress, DependsOn: []string{"A3.1"}},
		{ID: "A4", Description: "Rate limiting", Status: state.StatusPending, Attempts: 3, LastFailure: "timeout"},
		{ID: "A5", Description: "Docs", Status: state.StatusPending, DependsOn: []string{"A3"}},
	}, "add auth")
	s.Control.Status = state.ControlRunning
	s.Control.Iteration = 4
	s.ORGroups = []state.ORGroup{{Name: "sessions", Choices: []string{"A2a", "A2b"}, Selected: "A2b", Failed: []string{"A2a"}}}
	s.Decompositions = []state.Decomposition{{Parent: "A3", Children: []string{"A3.1", "A3.2"}, Reason: "too big"}}
	s.Bindings = []state.Binding{
		{AtomID: "A1", Summary: "user model with bcrypt hashes", Artifacts: []string{"user.go", "user_test.go"}},
		{AtomID: "A2b", Summary: "JWT sessions", Artifacts: []string{"session.go"}},
		{AtomID: "A3.1", Summary: "POST /login", Artifacts: []string{"login.go"}},
	}
	ok, fail := journal.Bool(true), journal.Bool(false)
	agents := map[string]any{"worker": "claude (model sonnet)", "probe": "codex", "planner": "claude (model opus)"}
	evs := []journal.Event{
		{Time: at(0), Type: journal.RunStart, Data: map[string]any{"agents": agents}},
		{Time: at(1), Type: journal.AtomStart, Iteration: 1, Atom: "A1", Role: "worker", Attempt: 1},
		{Time: at(1), Type: journal.AtomStart, Iteration: 1, Atom: "A4", Role: "worker", Attempt: 1},
		{Time: at(20), Type: journal.AtomFinish, Iteration: 1, Atom: "A1", Role: "worker", Attempt: 1, OK: ok, DurationMS: 19000, Tokens: 1200, CostUSD: 0.012,
			Data: map[string]any{"summary": "user model with bcrypt hashes", "artifacts": []any{"user.go", "user_test.go"}, "input_tokens": 1000.0, "output_tokens": 200.0}},
		{Time: at(30), Type: journal.AtomFinish, Iteration: 1, Atom: "A4", Role: "worker", Attempt: 1, OK: fail, DurationMS: 29000, Reason: "timeout", Data: map[string]any{"kind": "timeout", "usage_unknown": true}},
		{Time: at(31), Type: journal.Iteration, Iteration: 1, Reason: "progress"},
		{Time: at(32), Type: journal.AtomStart, Iteration: 2, Atom: "A2a", Role: "worker", Attempt: 1},
		{Time: at(40), Type: journal.AtomFinish, Iteration: 2, Atom: "A2a", Role: "worker", Attempt: 1, OK: fail, DurationMS: 8000, Reason: "exit status 2", Tokens: 500, CostUSD: 0.005, Data: map[string]any{"kind": "crash"}},
		{Time: at(41), Type: journal.ORSwitch, Iteration: 2, Atom: "A2b", Reason: "A2a failed", Data: map[string]any{"or_group": "sessions", "failed": "A2a"}},
		{Time: at(42), Type: journal.AtomStart, Iteration: 2, Atom: "A2b", Role: "probe", Attempt: 1},
		{Time: at(45), Type: journal.AtomFinish, Iteration: 2, Atom: "A2b", Role: "probe", Attempt: 1, OK: ok, DurationMS: 3000, Tokens: 100, CostUSD: 0.001},
		{Time: at(46), Type: journal.AtomStart, Iteration: 2, Atom: "A2b", Role: "worker", Attempt: 1},
		{Time: at(60), Type: journal.AtomFinish, Iteration: 2, Atom: "A2b", Role: "worker", Attempt: 1, OK: ok, DurationMS: 14000, Tokens: 900, CostUSD: 0.009,
			Data: map[string]any{"summary": "JWT sessions", "artifacts": []any{"session.go"}}},
		{Time: at(61), Type: journal.Merge, Iteration: 2, Atom: "A2b", Attempt: 1, OK: ok, Data: map[string]any{"changed": []any{"session.go"}, "commit": "abc1234"}},
		{Time: at(62), Type: journal.AtomStart, Iteration: 3, Atom: "A3", Role: "planner", Attempt: 1},
		{Time: at(70), Type: journal.AtomFinish, Iteration: 3, Atom: "A3", Role: "planner", Attempt: 1, OK: ok, DurationMS: 8000, Tokens: 300, CostUSD: 0.003, Data: map[string]any{"proposed": 1.0}},
		{Time: at(70), Type: journal.Decompose, Iteration: 3, Atom: "A3", OK: ok, Data: map[string]any{"children": []any{"A3.1", "A3.2"}}},
		{Time: at(71), Type: journal.AtomStart, Iteration: 3, Atom: "A3.1", Role: "worker", Attempt: 1},
		{Time: at(71), Type: journal.AtomStart, Iteration: 3, Atom: "A4", Role: "worker", Attempt: 2},
		{Time: at(80), Type: journal.AtomFinish, Iteration: 3, Atom: "A3.1", Role: "worker", Attempt: 1, OK: ok, DurationMS: 9000, Tokens: 700, CostUSD: 0.007,
			Data: map[string]any{"summary": "POST /login", "artifacts": []any{"login.go"}}},
		{Time: at(90), Type: journal.AtomFinish, Iteration: 3, Atom: "A4", Role: "worker", Attempt: 2, OK: fail, DurationMS: 19000, Reason: "timeout", Data: map[string]any{"kind": "timeout"}},
		{Time: at(91), Type: journal.Parked, Iteration: 3, Atom: "A4", Attempt: 3, Reason: "failed 3 times (max_attempts_per_atom 3)"},
		{Time: at(92), Type: journal.Verify, Iteration: 3, OK: fail, Data: map[string]any{
			"failures": []any{"tests: Command exited with code 1 (failure)"},
			"checklist": []any{
				map[string]any{"item": "tests", "type": "command", "passed": false, "evidence": "Command exited with code 1 (failure)\noutput (tail):\n" + goTestJSONSample},
				map[string]any{"item": "readme", "type": "file", "passed": true, "evidence": "File exists: README.md"},
			},
			"outputs": "/work/app/.claude/aot-loop/checks",
		}},
		{Time: at(93), Type: journal.Iteration, Iteration: 3, Reason: "progress"},
		{Time: at(94), Type: journal.AtomStart, Iteration: 4, Atom: "A3.2", Role: "worker", Attempt: 1},
	}
	return m, s, evs
}

// bigFixture is a loop of n atoms in chains of ten, every atom run once
// and some failing first, with a verification every hundred atoms: about
// ten events per atom.
func bigFixture(n int) (Meta, *state.State, []journal.Event) {
	atoms := make([]state.Atom, n)
	var bindings []state.Binding
	evs := []journal.Event{{Time: at(0), Type: journal.RunStart, Data: map[string]any{"agents": map[string]any{"worker": "claude"}}}}
	sec := 1
	ok, fail := journal.Bool(true), journal.Bool(false)
	for i := range atoms {
		id := fmt.Sprintf("A%04d", i)
		atoms[i] = state.Atom{ID: id, Description: "atom " + id, Status: state.StatusResolved, DependsOn: []string{}}
		if i%10 != 0 {
			atoms[i].DependsOn = []string{fmt.Sprintf("A%04d", i-1)}
		}
		files := []any{id + ".go", id + "_test.go"}
		bindings = append(bindings, state.Binding{AtomID: id, Summary: "did " + id, Artifacts: []string{id + ".go", id + "_test.go"}})
		for attempt := 1; attempt <= 2; attempt++ {
			evs = append(evs, journal.Event{Time: at(sec), Type: journal.AtomStart, Atom: id, Role: "worker", Attempt: attempt})
			sec++
			if attempt == 1 && i%3 == 0 {
				evs = append(evs,
					journal.Event{Time: at(sec), Type: journal.AtomFinish, Atom: id, Role: "worker", Attempt: 1, OK: fail, Reason: "exit 1", Data: map[string]any{"kind": "crash"}},
					journal.Event{Time: at(sec), Type: journal.Backoff, Atom: id, DurationMS: 1000},
					journal.Event{Time: at(sec), Type: journal.AtomReset, Atom: id})
				sec++
				continue
			}
			evs = append(evs, journal.Event{Time: at(sec), Type: journal.AtomFinish, Atom: id, Role: "worker", Attempt: attempt, OK: ok, Tokens: 1000, CostUSD: 0.01,
				Data: map[string]any{"summary": "did " + id, "artifacts": files}})
			sec++
			break
		}
		evs = append(evs, journal.Event{Time: at(sec), Type: journal.Iteration, Reason: "progress"},
			journal.Event{Time: at(sec), Type: journal.Checkpoint},
			journal.Event{Time: at(sec), Type: journal.Merge, Atom: id, OK: ok, Data: map[string]any{"changed": files}})
		if i%100 == 99 {
			evs = append(evs, journal.Event{Time: at(sec), Type: journal.Verify, OK: fail, Data: map[string]any{"failures": []any{"tests"},
				"checklist": []any{map[string]any{"item": "tests", "type": "command", "passed": false, "evidence": "output (tail):\nok  \tx\t0.1s\tcoverage: 50.0% of statements"}}}})
		}
		for len(evs) < (i+1)*10 {
			evs = append(evs, journal.Event{Time: at(sec), Type: journal.Stall})
		}
	}
	s := state.New(state.Objective{Goal: "big"}, atoms, "big")
	s.Control.Status = state.ControlRunning
	s.Bindings = bindings
	m := Meta{ID: "loop-v2-20260122-big000", Title: "big", CreatedAt: t0}
	return m, s, evs
}
