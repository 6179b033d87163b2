//go:build !windows

package proc

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCancelKillsGrandchildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	pidFile := t.TempDir() + "/pid"
	cmd := Shell(ctx, "sleep 30 & echo $! > "+pidFile+"; wait")
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	_ = cmd.Run()
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); err != nil {
			return // gone
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d survived the group kill", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
