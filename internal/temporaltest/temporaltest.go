// Package temporaltest starts the Temporal dev server for tests: the
// temporal CLI's `server start-dev`, installed by scripts/temporal-cli.sh.
// Without the CLI a test skips, unless AOT_REQUIRE_TEMPORAL=1, under which
// it fails.
package temporaltest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
)

// EagerActivities is the dev server's setting that docs/TEMPORAL.md
// recommends and the tests' servers run with (Temporal servers from 1.32
// on have it by default): a worker that schedules an activity may start it
// at once, without a round trip through the task queue. The tests that
// start a server of their own (fence_test.go) run without it, and so does
// every test under AOT_DEV_SERVER_EAGER=0 (to time a server without it).
const EagerActivities = "system.enableActivityEagerExecution=true"

// CLI finds the temporal binary: $AOT_TEMPORAL_CLI, then
// $AOT_TEMPORAL_CLI_DIR/temporal, then ~/.cache/aot/temporal/temporal
// (where scripts/temporal-cli.sh installs it), then $PATH; "" when none.
func CLI() string {
	if p := os.Getenv("AOT_TEMPORAL_CLI"); p != "" {
		return p
	}
	var dirs []string
	if d := os.Getenv("AOT_TEMPORAL_CLI_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".cache", "aot", "temporal"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "temporal")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p
	}
	return ""
}

// QuietLogger keeps the SDK's logs out of the test output.
func QuietLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// pids are the running dev servers' process ids, by address.
var pids sync.Map

// PID is the process id of the dev server DevServer started at addr, 0
// when it started none there (benchmarks read its CPU time).
func PID(addr string) int {
	if v, ok := pids.Load(addr); ok {
		return v.(int)
	}
	return 0
}

// DevServer starts a Temporal dev server on a free port with a database of
// its own, waits until it answers, and stops it when the test ends. It
// returns the server's address. Call it before anything changes HOME.
func DevServer(t testing.TB) string {
	t.Helper()
	bin := CLI()
	if bin == "" {
		const msg = "no temporal CLI (install it with scripts/temporal-cli.sh, or set AOT_TEMPORAL_CLI)"
		if os.Getenv("AOT_REQUIRE_TEMPORAL") == "1" {
			t.Fatal(msg + "; AOT_REQUIRE_TEMPORAL=1")
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(port),
		"--db-filename", filepath.Join(dir, "temporal.db"), "--log-level", "warn")
	if os.Getenv("AOT_DEV_SERVER_EAGER") != "0" {
		cmd.Args = append(cmd.Args, "--dynamic-config-value", EagerActivities)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pids.Store(addr, cmd.Process.Pid)
	t.Cleanup(func() {
		pids.Delete(addr)
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	serverLog := func() string {
		data, _ := os.ReadFile(logFile.Name())
		s := string(data)
		if len(s) > 4000 {
			s = s[len(s)-4000:]
		}
		return strings.TrimSpace(s)
	}
	for deadline := time.Now().Add(90 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: QuietLogger()})
		cancel()
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the dev server exited: %v\n%s", err, serverLog())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dev server did not answer at %s within 90s: %v\n%s", addr, err, serverLog())
		}
	}
	t.Logf("temporal dev server at %s answered after %s", addr, time.Since(started).Round(time.Millisecond))
	return addr
}
