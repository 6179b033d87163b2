package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// An engine that ends before it holds the run lock: aot run --detach
// reports its exit code and the end of its output, and fails. (The engine
// here is a shell standing in for aot: a real one checks everything that
// fails this early before --detach starts it.)
func TestDetachReportsAnEngineThatEndsAtOnce(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stateFile := filepath.Join(dir, ".claude", "aot-loop-state.md")
	if err := os.MkdirAll(filepath.Dir(stateFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateFile, []byte("---\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	opts := &runOptions{
		IO:     newStreams(strings.NewReader(""), &out, &errOut, func(string) string { return "" }),
		Global: &globalOptions{StateFile: stateFile},
		Detach: true,
		self:   sh,
		args:   []string{"--detach", "-c", "echo 'workspace: no git isolation' >&2; exit 7"},
	}
	err = runDetach(opts)
	var ce *cmdError
	if !errors.As(err, &ce) || ce.code != 7 {
		t.Fatalf("err = %v; want exit 7", err)
	}
	if got := errOut.String(); !strings.Contains(got, "aot run ended at once (exit 7)") || !strings.Contains(got, "workspace: no git isolation") || strings.Contains(got, "---") {
		t.Errorf("stderr:\n%s", got)
	}
	if out.Len() != 0 {
		t.Errorf("stdout: %q", out.String())
	}
	log, err := os.ReadFile(filepath.Join(dir, ".claude", "aot-loop", "run.out"))
	if err != nil || !bytes.Contains(log, []byte("no git isolation")) {
		t.Errorf("run.out: %q, %v", log, err)
	}
}
