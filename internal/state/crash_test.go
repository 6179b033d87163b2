//go:build unix

package state

import (
	"bufio"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestD3KilledWriterLeavesOldOrNewFile kills a process in the middle of its
// writes, again and again: the file must always be one that was written
// whole (the seed scripts truncated it first, so a crash could leave it
// empty). The child bumps control.iteration in a loop, so every complete
// file is miniState with some iteration N, and N never goes back.
func TestD3KilledWriterLeavesOldOrNewFile(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 500 processes")
	}
	killWriter(t, "counter", 500, 80*time.Second)
}

// TestKilledControlWriterLeavesOldOrNewFile is the same for UpdateControl,
// the hooks' write (the child counts with it instead of Update).
func TestKilledControlWriterLeavesOldOrNewFile(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 200 processes")
	}
	killWriter(t, "control-counter", 200, 30*time.Second)
}

// killWriter kills a helper of the given mode, which counts
// control.iteration up, kills times (within budget) and checks the file
// after each kill.
func killWriter(t *testing.T, mode string, kills int, budget time.Duration) {
	st := writeState(t, miniState)
	rng := rand.New(rand.NewPCG(1, 2))
	last, tempFiles := 1, 0
	deadline := time.Now().Add(budget)
	for i := 0; i < kills; i++ {
		if time.Now().After(deadline) {
			t.Logf("stopping after %d kills to bound the run time", i)
			break
		}
		cmd := helperCmd(mode, st.Path())
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("kill %d: the child did not start writing: %v", i, err)
		}
		time.Sleep(time.Duration(rng.IntN(20_001)) * time.Microsecond)
		_ = cmd.Process.Kill() // SIGKILL: no chance to clean up
		_ = cmd.Wait()

		data, err := os.ReadFile(st.Path())
		if err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		s, err := Parse(data)
		if err != nil {
			t.Fatalf("kill %d: the file does not parse: %v\n%q", i, err, data)
		}
		n := s.Control.Iteration
		want := strings.Replace(miniState, "  iteration: 1\n", "  iteration: "+strconv.Itoa(n)+"\n", 1)
		if string(data) != want {
			t.Fatalf("kill %d: the file is not a whole write of iteration %d:\n%q", i, n, data)
		}
		if n <= last {
			t.Fatalf("kill %d: iteration %d, but %d was written before", i, n, last)
		}
		last = n

		// A killed writer may leave its temp file (D39); the next write
		// removes it, so there is never more than the last one.
		temps, _ := filepath.Glob(filepath.Join(filepath.Dir(st.Path()), ".state.md.tmp-*"))
		if len(temps) > 1 {
			t.Fatalf("kill %d: temp files pile up: %v", i, temps)
		}
		tempFiles += len(temps)
	}
	t.Logf("%d writes survived the kills; %d kills left a temp file, removed by the next write", last-1, tempFiles)
}
