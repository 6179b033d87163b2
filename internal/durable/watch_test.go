package durable

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"
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
