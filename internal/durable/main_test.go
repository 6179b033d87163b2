package durable

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// TestMain also makes the test binary the doomed worker of
// TestKilledWorkersAttemptIsFinishedByAnother and of the tests of held
// work (integration_held_test.go): a process of its own, so it can be
// killed or stopped.
func TestMain(m *testing.M) {
	if addr := os.Getenv("AOT_TEST_WORKER_ADDRESS"); addr != "" {
		c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger(), DataConverter: DataConverter()})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// SIGTERM stops it as it stops aot worker: gracefully.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		grace, _ := time.ParseDuration(os.Getenv("AOT_TEST_WORKER_GRACE"))
		err = RunWorker(ctx, WorkerOptions{Client: c, TaskQueue: os.Getenv("AOT_TEST_WORKER_QUEUE"), Grace: grace,
			CacheDir: os.Getenv("AOT_TEST_WORKER_CACHE"), Identity: "doomed", NewAgent: execAgents, Heartbeat: time.Second,
			Say: func(line string) { fmt.Fprintln(os.Stderr, "the worker:", line) }})
		if ctx.Err() != nil && err == nil {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "the worker returned:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
