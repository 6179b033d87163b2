package backend

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aot-loop/aot/internal/agent"
)

func TestRolesInheritTheDefaultUnlessTheyNameAnotherBackend(t *testing.T) {
	c, err := Parse([]byte(`
agent: claude
model: sonnet
bin: /opt/claude
roles:
  judge: {agent: anthropic, model: opus}
  probe: {model: haiku}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.For(agent.Worker); s.Agent != "claude" || s.Model != "sonnet" || s.Bin != "/opt/claude" {
		t.Errorf("worker = %+v", s)
	}
	if s := c.For(agent.Probe); s.Agent != "claude" || s.Model != "haiku" || s.Bin != "/opt/claude" {
		t.Errorf("probe = %+v", s)
	}
	if s := c.For(agent.Judge); s.Agent != "anthropic" || s.Model != "opus" || s.Bin != "" {
		t.Errorf("judge = %+v", s)
	}
	if s := (Config{}).For(agent.Worker); s.Agent != "exec" {
		t.Errorf("default = %+v", s)
	}
}

func TestFlagsOverrideTheFile(t *testing.T) {
	c, _ := Parse([]byte("agent: claude\nmodel: sonnet\nroles:\n  judge: {agent: anthropic}\n"))
	if err := c.Override("codex", "", []string{"planner=openai:gpt-x"}); err != nil {
		t.Fatal(err)
	}
	if s := c.For(agent.Worker); s.Agent != "codex" || s.Model != "" {
		t.Errorf("worker = %+v (the file's claude model must not follow --agent codex)", s)
	}
	if s := c.For(agent.Planner); s.Agent != "openai" || s.Model != "gpt-x" {
		t.Errorf("planner = %+v", s)
	}
	if s := c.For(agent.Judge); s.Agent != "anthropic" {
		t.Errorf("judge = %+v", s)
	}
	for _, bad := range []string{"judge", "boss=claude", "judge="} {
		if err := c.Override("", "", []string{bad}); err == nil || !strings.Contains(err.Error(), "--role") {
			t.Errorf("--role %s: err = %v", bad, err)
		}
	}
}

func TestABadAgentsFileNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "aot-loop-state.md")
	os.WriteFile(PathFor(state), []byte("agent: claude\nmodle: sonnet\n"), 0o644)
	_, err := Load(state)
	if err == nil || !strings.Contains(err.Error(), PathFor(state)) || !strings.Contains(err.Error(), "modle") || !strings.Contains(err.Error(), "2") {
		t.Fatalf("err = %v", err)
	}
	os.WriteFile(PathFor(state), []byte("roles:\n  boss: {agent: claude}\n"), 0o644)
	if _, err := Load(state); err == nil || !strings.Contains(err.Error(), "roles.boss") {
		t.Fatalf("err = %v", err)
	}
	os.WriteFile(PathFor(state), []byte("agent: nope\n"), 0o644)
	c, err := Load(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(c, Env{}); err == nil || !strings.Contains(err.Error(), `unknown agent "nope"`) || !strings.Contains(err.Error(), PathFor(state)) {
		t.Fatalf("err = %v", err)
	}
	if c, err := Load(filepath.Join(t.TempDir(), "s.md")); err != nil || c.Agent != "" {
		t.Fatalf("missing file: %+v %v", c, err)
	}
}

func TestByRoleSendsEachRoleToItsAgent(t *testing.T) {
	c, err := Parse([]byte(`
agent: exec
command: |
  echo '{"success": true, "feasible": true}'
roles:
  probe:
    command: |
      echo '{"feasible": false}'
`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(c, Env{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.Run(context.Background(), agent.Task{Role: agent.Worker, Workdir: t.TempDir()})
	if err != nil || !w.Success {
		t.Fatalf("worker: %+v %v", w, err)
	}
	p, err := a.Run(context.Background(), agent.Task{Role: agent.Probe, Workdir: t.TempDir()})
	if err != nil || p.Feasible {
		t.Fatalf("probe: %+v %v", p, err)
	}
}

func TestProcessStreamsLinesAndClassifiesFailures(t *testing.T) {
	var lines []string
	var log strings.Builder
	p := &Process{Bin: "/bin/sh", Args: []string{"-c", `printf '{"a":1}\n{"b":2}\nlast'; echo oops >&2; exit 3`}, Log: &log,
		OnLine: func(l []byte) { lines = append(lines, string(l)) }}
	r := p.Run(context.Background())
	if strings.Join(lines, "|") != `{"a":1}|{"b":2}|last` {
		t.Fatalf("lines = %q", lines)
	}
	f := r.Failure()
	if f == nil || f.Kind != agent.KindCrash || !strings.Contains(f.Reason, "exit status 3") || !strings.Contains(f.Reason, "oops") {
		t.Fatalf("failure = %+v", f)
	}
	if !strings.Contains(log.String(), `{"b":2}`) || !strings.Contains(log.String(), "oops") {
		t.Fatalf("log = %q", log.String())
	}
	slow := &Process{Bin: "/bin/sleep", Args: []string{"30"}, Timeout: 200e6}
	if f := slow.Run(context.Background()).Failure(); f == nil || f.Kind != agent.KindTimeout {
		t.Fatalf("timeout = %+v", f)
	}
	q := &Process{Bin: "/bin/echo", Args: []string{"it's", "a b"}}
	if r := q.Run(context.Background()); r.Failure() != nil || string(r.Stdout) != "it's a b\n" {
		t.Fatalf("quoting: %q %+v", r.Stdout, r.Failure())
	}
}
