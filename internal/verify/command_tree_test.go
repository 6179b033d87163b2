//go:build linux

package verify

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestCommandEscapedChildrenDoNotHoldTheVerdict: children that left the
// process group (setsid) or were orphaned (double fork) neither hold the
// verdict by keeping the output pipe open nor outlive it.
func TestCommandEscapedChildrenDoNotHoldTheVerdict(t *testing.T) {
	for _, command := range []string{
		"setsid sleep 30 & echo $! > pid; echo done",
		"(sleep 30 & echo $! > pid) & wait; echo done",
	} {
		t.Run(command, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			got := Command(context.Background(), dir, command, false, 10*time.Second)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("an escaped child held the check for %v", d)
			}
			if !got.Passed || got.OutputSummary != "done\n" {
				t.Fatalf("%+v", got)
			}
			waitGone(t, readPid(t, filepath.Join(dir, "pid")))
		})
	}
}

// TestCommandEndlessOutput: a command that prints without end keeps memory
// bounded, times out, and its tree (including a setsid child) is killed.
func TestCommandEndlessOutput(t *testing.T) {
	dir := t.TempDir()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	got := Command(context.Background(), dir, "setsid sleep 30 & echo $! > pid; yes", false, 500*time.Millisecond)
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	if d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	if got.Passed || !got.TimedOut || len(got.OutputSummary) != outputTail || !strings.HasSuffix(got.OutputSummary, "y\n") {
		t.Fatalf("%+v", got)
	}
	// The output is read in 32 KiB chunks into a 2000-byte tail: what is
	// allocated does not grow with what was printed (hundreds of MiB).
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("allocated %d MiB", alloc>>20)
	}
	waitGone(t, readPid(t, filepath.Join(dir, "pid")))
}
