package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// script is a synchronous Host: attempts end in the order they started,
// one per step, as fail says; its clock moves only when the loop waits.
type script struct {
	t       *testing.T
	c       *Core
	now     time.Time
	queue   []Attempt
	events  []string
	fail    func(a Attempt) bool
	checks  int
	started int
}

func (h *script) Now() time.Time { return h.now }
func (h *script) Event(ev journal.Event) {
	h.events = append(h.events, fmt.Sprintf("%s %s %s %d", ev.Type, ev.Role, ev.Atom, ev.Attempt))
}
func (h *script) Say(string)                         {}
func (h *script) Start(_ context.Context, a Attempt) { h.queue = append(h.queue, a); h.started++ }
func (h *script) Cancel(id int)                      {}
func (h *script) Drain(context.Context) {
	for len(h.queue) > 0 {
		a := h.queue[0]
		h.queue = h.queue[1:]
		h.c.Finish(bg, a.ID, Finished{Err: &agent.AttemptError{Kind: agent.KindCancelled, Reason: "cancelled"}})
	}
}
func (h *script) Checks(context.Context, bool) (verify.Report, error) {
	h.checks++
	for _, a := range h.c.State().Atoms {
		if a.Status != state.StatusResolved {
			return verify.Report{Checklist: []verify.ItemResult{{Item: "all done", Evidence: a.ID + " is " + a.Status}}}, nil
		}
	}
	return verify.Report{Passed: true}, nil
}
func (h *script) RunAgent(context.Context, agent.Task) (agent.Result, error, time.Duration) {
	return agent.Result{}, nil, time.Second
}
func (h *script) Sync() error                { return nil }
func (h *script) Flush() error               { return nil }
func (h *script) ShowPause(*PauseInfo) error { return nil }

// bg is the context a test's Core steps run under.
var bg = context.Background()

// step finishes the oldest attempt in flight.
func (h *script) step() {
	a := h.queue[0]
	h.queue = h.queue[1:]
	h.now = h.now.Add(time.Second)
	switch {
	case a.Role == agent.Probe:
		h.c.Finish(bg, a.ID, Finished{Result: agent.Result{Feasible: true, Findings: "fine"}})
	case a.Role == agent.Planner:
		h.c.Finish(bg, a.ID, Finished{Result: agent.Result{}})
	case h.fail(a):
		h.c.Finish(bg, a.ID, Finished{Result: agent.Result{Summary: "not yet"}})
	default:
		h.c.Finish(bg, a.ID, Finished{Result: agent.Result{Success: true, Summary: "did " + a.Atom}})
	}
}

// drive runs the loop as durable's workflow does, until it ends or, with
// handOver > 0, until that many attempts have ended and nothing is in
// flight (then it returns ok false).
func (h *script) drive(handOver int) (Outcome, bool) {
	c := h.c
	ended := 0
	for range 100000 {
		if out, done := c.Bounds(); done {
			return c.End(c.GiveUp(bg, out), ""), true
		}
		c.Schedule(bg)
		if handOver > 0 && ended >= handOver && c.InFlight() == 0 {
			return Outcome{}, false
		}
		if handOver > 0 && ended >= handOver {
			c.Hold(true)
		}
		if c.Quiet() {
			if out, done := c.Settle(bg); done {
				return c.End(out, ""), true
			}
			continue
		}
		if len(h.queue) == 0 {
			h.now = c.Wake() // nothing runs: the loop waits for its next deadline
			continue
		}
		h.step()
		ended++
		if out, done := c.AfterFinish(bg); done {
			return c.End(out, ""), true
		}
	}
	h.t.Fatal("the loop did not end in 100,000 steps")
	return Outcome{}, true
}

func randomLoop(seed uint64) (*state.State, func(Attempt) bool) {
	rng := rand.New(rand.NewPCG(seed, seed))
	n := 5 + rng.IntN(20)
	var atoms []state.Atom
	for i := range n {
		a := state.Atom{ID: fmt.Sprintf("A%d", i), Description: fmt.Sprintf("atom %d", i)}
		for d := range i {
			if rng.IntN(4) == 0 {
				a.DependsOn = append(a.DependsOn, fmt.Sprintf("A%d", d))
			}
		}
		atoms = append(atoms, a)
	}
	s := state.New(state.Objective{Goal: "g", BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "true"}},
		Constraints: state.Constraints{MaxParallelAgents: 1 + rng.IntN(3), MaxAttemptsPerAtom: 4, MaxStallCount: 6, MaxIterations: 60}}, atoms, "g")
	hard := map[string]int{}
	for _, a := range atoms {
		hard[a.ID] = rng.IntN(3) // failures before it succeeds; some atoms run out of attempts
		if rng.IntN(8) == 0 {
			hard[a.ID] = 9
		}
	}
	return s, func(a Attempt) bool { return a.N <= hard[a.Atom] }
}

// A Core handed over through Carry (Temporal's Continue-As-New: the state
// and the Carry as JSON, a new Core) decides exactly what the same Core
// would have decided had it gone on after letting its attempts finish at
// the same points: the same attempts, the same events, the same end.
func TestCoreCarryHandsOverWithoutChangingADecision(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := func(t *testing.T, seed uint64, recreate bool) (*script, Outcome, int) {
		s, fail := randomLoop(seed)
		h := &script{t: t, now: start, fail: fail}
		h.c = NewCore(s, CoreOptions{}, h)
		for handOvers := 0; ; handOvers++ {
			out, done := h.drive(3)
			if done {
				return h, out, handOvers
			}
			if !recreate {
				h.c.Hold(false)
				continue
			}
			data, err := json.Marshal(h.c.Carry())
			if err != nil {
				t.Fatal(err)
			}
			var back Carry
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			next, err := state.Parse(state.Marshal(h.c.State()))
			if err != nil {
				t.Fatal(err)
			}
			h.c = NewCore(next, CoreOptions{Carry: &back}, h)
		}
	}
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			same, want, _ := run(t, seed, false)
			handed, got, n := run(t, seed, true)
			if n == 0 {
				t.Skip("the loop ended before a hand-over")
			}
			if got.Reason != want.Reason || got.Message != want.Message || got.Iterations != want.Iterations || got.Resolved != want.Resolved {
				t.Errorf("handed over %d times: %s %q (%d iterations, %d resolved)\none Core: %s %q (%d iterations, %d resolved)",
					n, got.Reason, got.Message, got.Iterations, got.Resolved, want.Reason, want.Message, want.Iterations, want.Resolved)
			}
			if !slices.Equal(handed.events, same.events) {
				t.Errorf("the events differ:\nhanded over %q\none Core    %q", handed.events, same.events)
			}
			if handed.checks != same.checks {
				t.Errorf("verifications: %d handed over, %d with one Core", handed.checks, same.checks)
			}
		})
	}
}
