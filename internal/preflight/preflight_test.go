package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
)

func TestExecProgramIsTheFirstProgramTheShellRuns(t *testing.T) {
	for _, tc := range []struct{ command, want string }{
		{"sh agent.sh", "sh"},
		{"  python3 -m agent --fast", "python3"},
		{"./agent.sh", "./agent.sh"},
		{"/opt/bin/agent", "/opt/bin/agent"},
		{"FOO=1 BAR=2 node agent.js", "node"},
		{"exec my-agent", "my-agent"},
		{"command -v x", ""},
		{"exec -a name agent", ""},
		{"true", ""},
		{"cd sub && make agent", ""},
		{"echo '{}'", ""},
		{"$AGENT --x", ""},
		{"'my agent' --x", ""},
		{"(cd x; run)", ""},
		{"", ""},
	} {
		if got := execProgram(tc.command); got != tc.want {
			t.Errorf("execProgram(%q) = %q, want %q", tc.command, got, tc.want)
		}
	}
}

// Roles on one program are one check; a program missing names them all.
func TestProgramsGroupsRolesByProgram(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "my-claude")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 1.2.3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := backend.Parse([]byte("agent: claude\nroles:\n  judge: {agent: codex, bin: nowhere-codex}\n  planner: {bin: " + bin + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Getenv: func(string) string { return "" }, LookPath: func(name string) (string, error) {
		return "", os.ErrNotExist
	}}
	got := Programs(context.Background(), cfg, []agent.Role{agent.Probe, agent.Worker, agent.Judge, agent.Planner}, dir, env, true)
	var lines []string
	for _, c := range got {
		lines = append(lines, string(c.Level)+" "+strings.ReplaceAll(c.Detail, dir, "DIR"))
	}
	want := []string{
		"error claude (for the roles probe, worker) is not found on PATH",
		"error nowhere-codex (for the judge role) is not found on PATH",
		"ok DIR/my-claude for the planner role, version 1.2.3",
	}
	if d := cmp.Diff(want, lines); d != "" {
		t.Errorf("checks (-want +got):\n%s", d)
	}
}
