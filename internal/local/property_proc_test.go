//go:build linux

package local

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
)

// procChaos is a real agent process that misbehaves as real ones do, picked
// from the seed, the atom and the attempt: it succeeds, fails, exits at once
// with an error, leaves a background child (a dev server), prints without
// end, hangs, crashes, or answers garbage.
const procChaos = `
n=$(printf '%s' "$SEED-$AOT_ROLE-$AOT_ATOM_ID-$AOT_ATTEMPT" | cksum | cut -d' ' -f1)
answer='{"success": true, "feasible": true, "passed": true, "atoms": [], "summary": "done"}'
case $((n % 9)) in
0|1|2) [ "$AOT_ROLE" = worker ] && touch "$AOT_ATOM_ID.ok"; echo "$answer" ;;
3) echo '{"success": false, "feasible": true, "passed": false, "atoms": [], "summary": "no"}' ;;
4) exit 1 ;;
5) sleep 1000 & setsid sleep 1000 & [ "$AOT_ROLE" = worker ] && touch "$AOT_ATOM_ID.ok"; echo "$answer" ;;
6) yes ;;
7) sleep 1000 ;;
8) printf '{"success": tr'; kill -9 $$ ;;
esac
`

// TestPropertyRealProcessesNeverOutliveTheRun runs the engine over random
// DAGs with procChaos and checks, after every run, that it halted within its
// bounds, never completed without the base case, and that no process it
// started (marked through the environment every descendant inherits) is
// still alive.
func TestPropertyRealProcessesNeverOutliveTheRun(t *testing.T) {
	mark := fmt.Sprintf("AOT_PROPERTY_MARK=%d-%d", os.Getpid(), time.Now().UnixNano())
	name, value, _ := bytesCut(mark)
	t.Setenv(name, value)
	runs := 12
	if testing.Short() {
		runs = 4
	}
	for seed := 1; seed <= runs; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 99))
		s := randomState(r)
		s.Objective.Constraints.MaxTokens = 0
		dir := t.TempDir()
		path := filepath.Join(dir, ".claude", "aot-loop-state.md")
		if err := state.NewStore(path).Create(s, false); err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(dir, "agent.sh")
		if err := os.WriteFile(script, []byte(procChaos), 0o755); err != nil {
			t.Fatal(err)
		}
		ag := &agent.Exec{Command: "SEED=" + strconv.Itoa(seed) + " sh " + script}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		start := time.Now()
		out, err := Run(ctx, Options{Settings: engine.Settings{AgentTimeout: 300 * time.Millisecond}, StateFile: path, Agent: ag, PollInterval: 5 * time.Millisecond,
			RetryBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		cancel()
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if out.Reason == engine.ManualStop || time.Since(start) > 60*time.Second {
			t.Fatalf("seed %d: did not halt by itself: %+v", seed, out)
		}
		if out.Iterations > s.Objective.Constraints.MaxIterations {
			t.Fatalf("seed %d: %d iterations > max %d", seed, out.Iterations, s.Objective.Constraints.MaxIterations)
		}
		check := exec.Command("sh", "-c", s.Objective.BaseCase.Legacy.Value)
		check.Dir = dir
		if out.Reason == engine.Completed && check.Run() != nil {
			t.Fatalf("seed %d: completed but the base case fails", seed)
		}
		if left := marked(value); len(left) > 0 {
			t.Fatalf("seed %d: processes left after the run (%s): %v", seed, out.Reason, left)
		}
	}
}

func bytesCut(s string) (string, string, bool) {
	i := bytes.IndexByte([]byte(s), '=')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// marked returns the live processes, other than this one, whose environment
// carries value; it gives the kernel a moment to finish kills in flight.
func marked(value string) []string {
	var left []string
	for try := 0; try < 50; try++ {
		left = left[:0]
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil || !bytes.Contains(env, []byte(value)) || !processAlive(pid) {
				continue
			}
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			left = append(left, fmt.Sprintf("%d %q", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return left
}
