package agent

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExecAgentOutcomes(t *testing.T) {
	task := Task{Role: Worker, Atom: AtomRef{ID: "A1", Description: "build it"}, Attempt: 1}
	tests := []struct {
		name    string
		command string
		wantErr string // "" = success expected
		ok      bool
	}{
		{"success", `echo '{"success": true, "summary": "done", "artifacts": ["a.go"], "usage": {"input_tokens": 5, "output_tokens": 7, "cost_usd": 0.01}}'`, "", true},
		{"agent says no", `echo '{"success": false, "summary": "could not"}'`, "", false},
		{"reads its task", `grep -q '"id":"A1"' && echo "{\"success\": true, \"summary\": \"$AOT_ROLE $AOT_ATOM_ID $AOT_ATTEMPT\"}"`, "", true},
		{"garbage", `echo 'I am done!'`, "malformed answer", false},
		{"two documents", `echo '{"success": true} {"success": true}'`, "malformed answer", false},
		{"missing key", `echo '{"summary": "done"}'`, `no "success" key`, false},
		{"wrong type", `echo '{"success": "yes"}'`, "must be true or false", false},
		{"non-zero exit", `echo '{"success": true}'; exit 3`, "exit status 3", false},
		{"says why on stderr", `echo 'first'>&2; echo 'cannot create ../x: Permission denied' >&2; exit 2`, `agent exited with exit status 2; its stderr ends: "cannot create ../x: Permission denied"`, false},
		{"crash", `kill -9 $$`, "signal: killed", false},
		{"timeout", `sleep 30; echo '{"success": true}'`, "timed out", false},
		{"empty output", `true`, "malformed answer", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &Exec{Command: tc.command, Timeout: 500 * time.Millisecond}
			start := time.Now()
			r, err := e.Run(context.Background(), task)
			if time.Since(start) > 10*time.Second {
				t.Fatalf("attempt took %v", time.Since(start))
			}
			if tc.wantErr != "" {
				var ae *AttemptError
				if !errors.As(err, &ae) {
					t.Fatalf("want an AttemptError containing %q, got %v (result %+v)", tc.wantErr, err, r)
				}
				if !strings.Contains(ae.Reason, tc.wantErr) {
					t.Fatalf("reason %q does not mention %q", ae.Reason, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if r.OK(Worker) != tc.ok {
				t.Fatalf("OK = %v, want %v", r.OK(Worker), tc.ok)
			}
		})
	}
}

func TestExecAgentEnvironmentAndLog(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "attempt.log")
	ex := &Exec{
		Command: `echo "to the log" >&2; echo "{\"success\": true, \"summary\": \"$AOT_ROLE/$AOT_ATOM_ID/$AOT_ATTEMPT/$(pwd)\"}"`,
		Log:     func(Task) (io.WriteCloser, error) { return os.Create(logPath) },
	}
	r, err := ex.Run(context.Background(), Task{Role: Worker, Atom: AtomRef{ID: "A7"}, Attempt: 2, Workdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if want := "worker/A7/2/" + dir; r.Summary != want {
		t.Errorf("summary = %q, want %q", r.Summary, want)
	}
	log, _ := os.ReadFile(logPath)
	if want := "to the log\n--- stdout ---\n{\"success\": true, \"summary\": \"" + r.Summary + "\"}\n"; string(log) != want {
		t.Errorf("log = %q, want %q", log, want)
	}
}

func TestDecodeUsageLimitNeedsNoRoleKey(t *testing.T) {
	r, err := Decode(Worker, []byte(`{"usage_limit": true, "summary": "rate limited"}`))
	if err != nil || !r.UsageLimit || r.Success {
		t.Fatalf("Decode = %+v, %v", r, err)
	}
	if _, err := Decode(Worker, []byte(`{"usage_limit": false}`)); err == nil {
		t.Fatal("usage_limit false is no excuse for a missing success key")
	}
}
