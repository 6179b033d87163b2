//go:build temporal && unix

package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// What the agents print on a worker reaches the client's aot logs, the
// end of it when large; a retry of Temporal's (the worker could not
// commit atom A's work) is journaled on the client once, by however many
// clients saw it.
func TestTemporalAgentLogsAndRetriesReachTheClient(t *testing.T) {
	start := aotProcesses(t)
	root, _, ws, sf := temporalProject(t, "two files", "test -f A.txt && test -f B.txt", 2,
		state.Atom{ID: "A", Description: "write A.txt"}, state.Atom{ID: "B", Description: "write B.txt"})

	// A's first try leaves its worktree's index locked, so that the
	// worker cannot commit its work: the activity fails, once, and
	// Temporal retries it.
	marks := filepath.Join(root, "marks")
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	// A prints a line of its own; its second try (after the failed
	// commit) holds until the gate exists. B prints about 300 KB.
	gate := filepath.Join(root, "gate")
	const token = "agent-A-says-7f3c91e2"
	agent := `if [ "$AOT_ATOM_ID" = A ]; then echo "` + token + `" >&2; ` +
		`if mkdir ` + marks + `/locked 2>/dev/null; then : > "$(git rev-parse --git-dir)/index.lock"; ` +
		`else i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; fi; ` +
		`else echo START-OF-B >&2; i=0; while [ $i -lt 3000 ]; do echo "B filler line $i: the quick brown fox jumps over the lazy dog, again and again" >&2; i=$((i+1)); done; echo END-OF-B >&2; fi; ` +
		`echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "wrote '"$AOT_ATOM_ID"'"}'`

	const queue = "logs-e2e"
	_, wout := start("w1", ws, "worker", "--task-queue", queue, "--cache", filepath.Join(root, "cache-w1"), "--identity", "w1", "--grace", "1s", "--agent-command", agent)
	until(t, "w1 polls", 60*time.Second, func() bool { return strings.Contains(wout.String(), "polling task queue "+queue) })

	run, out := start("aot run", ws, "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec")
	retries := func() []journal.Event {
		evs, _ := journal.Read(journal.PathFor(sf))
		var out []journal.Event
		for _, ev := range evs {
			if ev.Type == journal.AttemptRetry {
				out = append(out, ev)
			}
		}
		return out
	}
	until(t, "the attached aot run journals the retry", 90*time.Second, func() bool { return len(retries()) > 0 })
	// Two more clients see the same retry under way: none journals it again.
	for range 2 {
		st, stOut := start("aot status", ws, "status")
		if err := st.Wait(); err != nil {
			t.Fatalf("aot status: %v\n%s", err, stOut)
		}
		if !strings.Contains(stOut.String(), "attempt_retry") {
			t.Errorf("aot status does not show the retry:\n%s", stOut)
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- run.Wait() }()
	select {
	case err := <-waited:
		if err != nil || !strings.Contains(out.String(), "completed (completed)") {
			t.Fatalf("aot run: %v\n%s", err, out)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the loop did not end within 3 minutes:\n%s", out)
	}

	// One retry, of A's attempt 1, on w1, with the failed commit.
	got := retries()
	if len(got) != 1 {
		t.Fatalf("%d attempt_retry events in the client's journal, want 1: %+v", len(got), got)
	}
	ev := got[0]
	worker, _ := ev.Data["worker"].(string)
	if worker == "" {
		worker, _ = ev.Data["running_on"].(string)
	}
	failure, _ := ev.Data["failure"].(string)
	if ev.Atom != "A" || ev.Role != "worker" || ev.Attempt != 1 || worker != "w1" || ev.Reason == "" || !strings.Contains(failure, "index.lock") {
		t.Errorf("the retry's event: %+v", ev)
	}
	if !regexp.MustCompile(`attempt_retry  A  worker  attempt 1  commit the attempt's work: .*  Temporal's try 2 of aot.Attempt  (after a failure on|running on) worker w1`).MatchString(out.String()) {
		t.Errorf("aot run did not say the retry:\n%s", out)
	}

	// aot logs on the client shows what A printed on the worker.
	logs, lout := start("aot logs", ws, "logs")
	if err := logs.Wait(); err != nil || !strings.Contains(lout.String(), "=== A worker attempt 1: ok") || !strings.Contains(lout.String(), token) {
		t.Errorf("aot logs: %v\n%s", err, lout)
	}
	// B's log arrives as its end, after a line that says what was cut and
	// where the whole log is.
	logsB, bout := start("aot logs B", ws, "logs", "B")
	if err := logsB.Wait(); err != nil {
		t.Fatalf("aot logs B: %v\n%s", err, bout)
	}
	text := bout.String()
	cut := regexp.MustCompile(`\[aot: the first (\d+) bytes of what the agent printed here are cut; the last (\d+) follow; the whole log is (\S+) on worker w1\]`).FindStringSubmatch(text)
	if cut == nil || !strings.Contains(text, "END-OF-B") || strings.Contains(text, "START-OF-B") {
		t.Fatalf("aot logs B does not show the end of B's log with the cut said:\n%.2000s", text)
	}
	if len(text) > 70<<10 {
		t.Errorf("aot logs B printed %d bytes, more than the 64 KiB that travel", len(text))
	}
	whole, err := os.ReadFile(cut[3])
	if err != nil || !strings.Contains(string(whole), "START-OF-B") || !strings.Contains(string(whole), "END-OF-B") {
		t.Errorf("the whole log on the worker, %s: %v (%d bytes)", cut[3], err, len(whole))
	}
}
