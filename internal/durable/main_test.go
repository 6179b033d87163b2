package durable

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// TestMain also makes the test binary the doomed worker of
// TestKilledWorkersAttemptIsFinishedByAnother: a process of its own, so it
// can be killed.
func TestMain(m *testing.M) {
	if addr := os.Getenv("AOT_TEST_WORKER_ADDRESS"); addr != "" {
		c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger(), DataConverter: DataConverter()})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		err = RunWorker(context.Background(), WorkerOptions{Client: c, TaskQueue: os.Getenv("AOT_TEST_WORKER_QUEUE"),
			CacheDir: os.Getenv("AOT_TEST_WORKER_CACHE"), Identity: "doomed", NewAgent: execAgents, Heartbeat: time.Second})
		fmt.Fprintln(os.Stderr, "the worker returned:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
