package durable

import (
	"context"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/aot-loop/aot/internal/temporaltest"
)

// WatchWorkers on a real server: the absence of workers is said at the
// first look and again while it lasts, and a worker's arrival is said
// once.
func TestWatchWorkersSaysAbsenceAndArrival(t *testing.T) {
	c := dialDev(t, devServer(t))
	const queue = "watched"
	var mu sync.Mutex
	var lines []string
	said := func(sub string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, sub) {
				return true
			}
		}
		return false
	}
	within := func(what string, d time.Duration, sub string) {
		t.Helper()
		for deadline := time.Now().Add(d); !said(sub); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("not within %s: %s (%q)\nsaid: %q", d, what, sub, lines)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchWorkers(ctx, c, queue, WatchOptions{Every: 200 * time.Millisecond, Repeat: time.Second, Say: func(s string) {
			mu.Lock()
			lines = append(lines, s)
			mu.Unlock()
		}})
	}()
	t.Cleanup(func() { cancel(); <-done })

	within("the absence", 10*time.Second, "no worker polls task queue watched: the loop waits until one does; start one with aot worker --task-queue watched")
	within("the absence again", 10*time.Second, "no worker polls task queue watched (for ")

	full := worker.New(c, queue, worker.Options{Identity: "full"})
	RegisterWorkflow(full)
	(&Activities{}).Register(full)
	if err := full.Start(); err != nil {
		t.Fatal(err)
	}
	defer full.Stop()
	within("the arrival", 15*time.Second, "worker full polls task queue watched now: the loop goes on")
	mu.Lock()
	n := len(lines)
	mu.Unlock()
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != n {
		t.Errorf("said more while workers serve: %q", lines[n:])
	}

	// QueuePollers answers the same.
	p, err := QueuePollers(context.Background(), c, queue)
	if err != nil || !p.Serving() || strings.Join(p.Names(), ",") != "full" {
		t.Errorf("QueuePollers: %+v %v", p, err)
	}
}

// A worker dialled with DialWith logs what the SDK says: while the server
// is away, its polls fail, and the log says so.
func TestWorkerLogsTheServerOutage(t *testing.T) {
	bin := temporaltest.CLI()
	if bin == "" {
		devServer(t) // skips, or fails under AOT_REQUIRE_TEMPORAL=1
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	server := exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", port,
		"--db-filename", filepath.Join(t.TempDir(), "t.db"), "--log-level", "error")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			server.Process.Kill()
			server.Wait()
		}
	}
	defer stop()
	t.Setenv("TEMPORAL_ADDRESS", addr)
	t.Setenv("TEMPORAL_NAMESPACE", "default")
	var log lockedLog
	var c client.Client
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err = DialWith(ctx, DialOptions{Log: SDKLog(&log, slog.LevelInfo)})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dev server did not answer: %v", err)
		}
	}
	defer c.Close()
	w := worker.New(c, "outage", worker.Options{Identity: "outage-worker"})
	RegisterWorkflow(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	waitLog := func(what, sub string, within time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(within); !strings.Contains(log.String(), sub); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within %s: %s (%q)\n%s", within, what, sub, log.String())
			}
		}
	}
	waitLog("the worker's start", `level=INFO msg="Started Worker" from=temporal-sdk`, 10*time.Second)
	stop()
	waitLog("the failing polls", `level=WARN msg="Failed to poll for task." from=temporal-sdk`, 60*time.Second)
}

// lockedLog is a log written from the SDK's goroutines and read by the
// test.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
