package server_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// meetAgent is an exec agent for two loops at once: each atom says it
// started, waits (at most 20 s) until the other loop's atom has started
// too, then writes its file in its worktree.
const meetAgent = `[ "$AOT_ROLE" != worker ] && { echo '{"feasible": true, "atoms": []}'; exit 0; }
touch "$MEET/$AOT_ATOM_ID.started"
other=ONE; [ "$AOT_ATOM_ID" = ONE ] && other=TWO
i=0; while [ ! -e "$MEET/$other.started" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.done"
echo '{"success": true, "summary": "did it", "artifacts": ["'"$AOT_ATOM_ID"'.done"]}'
`

// Two loops created through the API in one git repository and run at the
// same time each work in their own worktrees on their own branches: both
// complete with their own work, and neither removes the other's.
func TestTwoLoopsOfOneRepositoryRunAtOnce(t *testing.T) {
	ws := t.TempDir()
	meet := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where the worktrees go
	t.Setenv("MEET", meet)
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=me", "-c", "user.email=me@example.com"}, args...)...)
		cmd.Dir = ws
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(ws, ".gitignore"), []byte(".claude/\nagent.sh\nmeet.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".gitignore")
	git("commit", "-q", "-m", "start")
	if err := os.WriteFile(filepath.Join(ws, "meet.sh"), []byte(meetAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	h := start(t, ws)
	one, two := h.create("ONE"), h.create("TWO")
	for _, id := range []string{one, two} {
		var out map[string]any
		if code := h.do("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "exec", "agent_command": "sh " + filepath.Join(ws, "meet.sh")}, &out); code != 202 {
			t.Fatalf("start %s: %d %v", id, code, out)
		}
	}
	h.waitFor("both loops end", func() bool {
		a, b := h.loop(one), h.loop(two)
		return a.Status != "running" && b.Status != "running" && !a.Engine.Running && !b.Engine.Running &&
			a.Status != "pending" && b.Status != "pending"
	})
	for _, id := range []string{one, two} {
		if s := h.loop(id); s.Status != "completed" || s.Progress.Resolved != s.Progress.Total {
			t.Errorf("loop %s ended %s, %d/%d resolved", id, s.Status, s.Progress.Resolved, s.Progress.Total)
		}
	}
	// One loop landed on main; the other found main moved and left its
	// work on its own branch, aot/<its id>.
	left := strings.Fields(git("for-each-ref", "--format=%(refname:short)", "refs/heads/aot"))
	if len(left) != 1 {
		t.Fatalf("loop branches left: %v, want the one loop's that could not land", left)
	}
	git("merge", "-q", "--no-edit", left[0])
	for _, f := range []string{"ONE.done", "TWO.done"} {
		if data, err := os.ReadFile(filepath.Join(ws, f)); err != nil || strings.TrimSpace(string(data)) != strings.TrimSuffix(f, ".done") {
			t.Errorf("%s: %q, %v", f, data, err)
		}
	}
	if got := git("for-each-ref", "refs/heads/aot-attempt"); got != "" {
		t.Errorf("attempt branches left: %s", got)
	}
	if got := strings.Count(git("worktree", "list", "--porcelain"), "worktree "); got != 1 {
		t.Errorf("%d worktrees, want only the person's", got)
	}
}
