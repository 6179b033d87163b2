//go:build !temporal

package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Without the temporal tag, aot hands the Temporal commands over to
// aot-temporal (beside it, else on PATH) with the whole command line, in its own place: the
// pid that started as aot is aot-temporal's, and its exit code is aot's.
func TestTemporalCommandsAreHandedToAotTemporal(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no exec on Windows: aot waits for aot-temporal as a child")
	}
	bin := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, "aot")); err != nil { // the test binary acts as aot (TestMain)
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "args")
	script := "#!/bin/sh\necho \"$$ $@\" > " + log + "\nexit 7\n"
	if err := os.WriteFile(filepath.Join(bin, "aot-temporal"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "aot"), "worker", "--task-queue", "q")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("aot worker: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(log)
	if want := fmt.Sprintf("%d worker --task-queue q", cmd.Process.Pid); strings.TrimSpace(string(got)) != want {
		t.Errorf("aot-temporal got %q, want %q (the pid aot started as)", got, want)
	}
	// Without it, the error says how to get it.
	t.Setenv("PATH", t.TempDir())
	if err := handOver([]string{"worker"}, nil); err == nil || !strings.Contains(err.Error(), "make build builds it") {
		t.Errorf("no aot-temporal: %v", err)
	}
}

func TestTemporalMarkerRoutesTheLoopCommands(t *testing.T) {
	sf := filepath.Join(t.TempDir(), ".claude", "aot-loop-state.md")
	if onTemporalLoop(sf) {
		t.Fatal("a loop without a marker is on Temporal")
	}
	os.MkdirAll(filepath.Join(filepath.Dir(sf), "aot-loop"), 0o755)
	os.WriteFile(filepath.Join(filepath.Dir(sf), "aot-loop", "temporal.json"), []byte(`{"workflow_id": "aot-1"}`), 0o644)
	if !onTemporalLoop(sf) {
		t.Fatal("the marker is not seen")
	}
}
