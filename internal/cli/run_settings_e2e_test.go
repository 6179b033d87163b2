//go:build temporal && unix

package cli

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// The same aot run, with the same settings, on Temporal and locally: the
// workers check the base case with the run's --check-timeout (a slow
// check is killed after 1s, not the default 60s), the loop ends for the
// same reason, and aot run --json prints the document aot help run
// describes, with the same fields as the local run's.
func TestTemporalRunTakesItsSettingsAndPrintsTheRunDocument(t *testing.T) {
	start := aotProcesses(t)
	const check = "sleep 20; test -f A.txt"
	agent := `echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "wrote '"$AOT_ATOM_ID"'"}'`
	flags := []string{"--json", "--quiet", "--agent", "exec", "--agent-command", agent, "--check-timeout", "1s", "--max-iterations", "20", "--no-wait"}

	docs := map[string]map[string]json.RawMessage{}
	for _, eng := range []string{"temporal", "local"} {
		root, _, ws, sf := temporalProject(t, "one file", check, 1, state.Atom{ID: "A", Description: "write A.txt"})
		args := append([]string{"run", "--engine", eng}, flags...)
		if eng == "temporal" {
			workerProcesses(t, start, ws, root, "settings", "--agent", "exec", "--agent-command", agent)
			args = append(args, "--task-queue", "settings")
		}
		began := time.Now()
		run, out := start("aot run --engine "+eng, ws, args...)
		waited := make(chan error, 1)
		go func() { waited <- run.Wait() }()
		var err error
		select {
		case err = <-waited:
		case <-time.After(3 * time.Minute):
			t.Fatalf("%s: the loop did not end within 3 minutes:\n%s", eng, out)
		}
		doc := runDocument(t, eng, out.String())
		docs[eng] = doc
		var code int
		if err := json.Unmarshal(doc["exit_code"], &code); err != nil {
			t.Fatalf("%s: exit_code: %v", eng, err)
		}
		var ee *exec.ExitError
		if exited := 0; err == nil || errors.As(err, &ee) {
			if ee != nil {
				exited = ee.ExitCode()
			}
			if exited != code || code == 0 {
				t.Errorf("%s: aot run exited %d, its document says %d (a check that always times out cannot complete)", eng, exited, code)
			}
		} else {
			t.Fatalf("%s: %v", eng, err)
		}
		// Every verification's slow check was killed at 1s.
		data, rerr := os.ReadFile(journal.PathFor(sf))
		if rerr != nil {
			t.Fatal(rerr)
		}
		if n := strings.Count(string(data), "timed out after 1s"); n == 0 || strings.Contains(string(data), "timed out after 1m0s") {
			t.Errorf("%s: the journal does not show the check killed at 1s (%d times):\n%s", eng, n, data)
		}
		if took := time.Since(began); took > 150*time.Second {
			t.Errorf("%s: the run took %s", eng, took)
		}
	}
	tk, lk := slices.Sorted(maps.Keys(docs["temporal"])), slices.Sorted(maps.Keys(docs["local"]))
	if !slices.Equal(tk, lk) {
		t.Errorf("aot run --json prints other fields on Temporal:\ntemporal %v\nlocal    %v", tk, lk)
	}
	for _, k := range []string{"reason", "exit_code", "message", "iterations", "resolved", "unresolved", "usage", "elapsed"} {
		if _, ok := docs["temporal"][k]; !ok {
			t.Errorf("the Temporal run's document has no %s: %v", k, tk)
		}
	}
	if string(docs["temporal"]["reason"]) != string(docs["local"]["reason"]) {
		t.Errorf("reason: temporal %s, local %s", docs["temporal"]["reason"], docs["local"]["reason"])
	}
}

// runDocument is the JSON document in aot run's output (its progress and
// the workers' notes around it).
func runDocument(t *testing.T, eng, out string) map[string]json.RawMessage {
	t.Helper()
	i := strings.Index(out, "{\n")
	j := strings.LastIndex(out, "\n}")
	if i < 0 || j < i {
		t.Fatalf("%s: no JSON document in:\n%s", eng, out)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out[i:j+2]), &doc); err != nil {
		t.Fatalf("%s: %v in:\n%s", eng, err, out)
	}
	return doc
}
