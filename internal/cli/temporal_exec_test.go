//go:build !temporal

package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without the temporal tag, aot hands the Temporal commands over to
// aot-temporal with the whole command line and ends with its exit code.
func TestTemporalCommandsAreHandedToAotTemporal(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "args")
	script := "#!/bin/sh\necho \"$@\" > " + log + "\nexit 7\n"
	if err := os.WriteFile(filepath.Join(bin, "aot-temporal"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	args := os.Args
	t.Cleanup(func() { os.Args = args })
	os.Args = []string{"aot", "worker", "--task-queue", "q"}
	err := handOver()
	var ce *cmdError
	if !errors.As(err, &ce) || ce.code != 7 {
		t.Fatalf("handOver: %v", err)
	}
	got, _ := os.ReadFile(log)
	if strings.TrimSpace(string(got)) != "worker --task-queue q" {
		t.Errorf("aot-temporal got %q", got)
	}
	// Without it, the error says how to get it.
	t.Setenv("PATH", t.TempDir())
	if err := handOver(); err == nil || !strings.Contains(err.Error(), "make build builds it") {
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
