//go:build unix

package durable

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/temporaltest"
)

// cutProxy forwards 127.0.0.1 connections to a Temporal service, except
// while cut: what a worker sees when its network, or the service, is down.
type cutProxy struct {
	l     net.Listener
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l}
	t.Cleanup(func() { l.Close(); p.cut() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			out, err := net.Dial("tcp", target)
			if err != nil || down {
				in.Close()
				if out != nil {
					out.Close()
				}
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) addr() string { return p.l.Addr().String() }

// cut closes every connection through the proxy and refuses new ones
// until restore.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// A worker cut off from Temporal for less than the heartbeat timeout goes
// on with its attempts. Cut off for longer, it gives them up (agents
// killed) before Temporal times them out and retries them on another
// worker: no attempt ever has two agents at once, and the loop completes
// with each atom merged once.
func TestAWorkerCutOffFromTemporalStopsItsAgentsBeforeTheirRetriesStart(t *testing.T) {
	addr := temporaltest.DevServer(t)
	repo, seed := newRemote(t, map[string]string{})
	c := dialDev(t, addr)
	proxy := newCutProxy(t, addr)
	const queue = "fence"
	inProcessWorker(t, proxy.addr(), queue, "cut-off")

	run, pids, gate := holdingLoop(t, c, queue, repo, seed)
	first := pids()
	anyAlive := func() bool {
		for _, pid := range first {
			if isRunning(pid) {
				return true
			}
		}
		return false
	}

	// 8 s without Temporal: the agents go on.
	proxy.cut()
	time.Sleep(8 * time.Second)
	proxy.restore()
	time.Sleep(4 * time.Second)
	for _, pid := range first {
		if !isRunning(pid) {
			t.Fatalf("agent %s did not survive an 8 s outage", pid)
		}
	}

	// For good: given up before the retries start on another worker.
	inProcessWorker(t, addr, queue, "connected")
	cut := time.Now()
	proxy.cut()
	var gaveUp time.Duration
	for deadline := cut.Add(80 * time.Second); len(pids()) < 4; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the attempts were not retried within 80s of the cut (agents: %v)", pids())
		}
		alive := anyAlive()
		if !alive && gaveUp == 0 {
			gaveUp = time.Since(cut)
		}
		if alive && len(pids()) > 2 {
			t.Fatalf("a retry's agent started %s after the cut while the cut-off worker's agents %v still ran", time.Since(cut).Round(time.Millisecond), first)
		}
	}
	// It gives up 15 s (the 30 s heartbeat timeout less three intervals)
	// after its last heartbeat that reached Temporal, which came up to one
	// interval (5 s) before the cut.
	if lower := attemptHeartbeat - 3*DefaultHeartbeat - DefaultHeartbeat; gaveUp < lower {
		t.Errorf("the cut-off worker gave its attempts up %s after the cut: not before %s (the heartbeat timeout is 30s)", gaveUp, lower)
	}
	t.Logf("the cut-off worker gave its attempts up %s after the cut; both retries started by %s", gaveUp.Round(time.Millisecond), time.Since(cut).Round(time.Millisecond))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	landedOnce(t, c, run, repo, integration(run.GetID()))
}

// holdingLoop starts the four-atom loop with agents that note their pid
// and hold until the file gate exists (at most two minutes), and waits
// until the first two (A and B) run; pids lists the agents so far.
func holdingLoop(t *testing.T, c client.Client, queue, repo, seed string) (run client.WorkflowRun, pids func() []string, gate string) {
	t.Helper()
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	gate = filepath.Join(dir, "gate")
	hold := `echo $$ >> ` + ran + `; i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; `
	run = startLoop(t, c, queue, repo, seed, writesItsFile(hold))
	pids = func() []string {
		data, _ := os.ReadFile(ran)
		return strings.Fields(string(data))
	}
	waitFor(t, "two agents run", 60*time.Second, func() bool { return len(pids()) == 2 })
	return run, pids, gate
}

// waitFor polls cond every 50ms for at most within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
	}
}

// isRunning says whether the process pid is alive and not a zombie.
func isRunning(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || syscall.Kill(n, 0) != nil {
		return false
	}
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return true // no /proc: alive as far as kill says
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// devServerAt runs the Temporal dev server on port with the database file
// db until the returned stop is called (or the test ends), once it answers.
func devServerAt(t *testing.T, cli string, port int, db string) (stop func()) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(port),
		"--db-filename", db, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	t.Cleanup(stop)
	waitFor(t, "the dev server answers at "+addr, 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quietLogger()})
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return stop
}

// The dev server stopped for 10 s and started again on its database: the
// running agents go on, and each atom is run once.
func TestAttemptsSurviveADevServerRestart(t *testing.T) {
	cli := temporaltest.CLI() // before HOME changes
	if cli == "" {
		temporaltest.DevServer(t) // skips, or fails under AOT_REQUIRE_TEMPORAL=1
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	db := filepath.Join(t.TempDir(), "temporal.db")
	stop := devServerAt(t, cli, port, db)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	repo, seed := newRemote(t, map[string]string{})
	c := dialDev(t, addr)
	const queue = "restart"
	inProcessWorker(t, addr, queue, "through-the-outage")

	run, pids, gate := holdingLoop(t, c, queue, repo, seed)
	first := pids()

	stop()
	time.Sleep(10 * time.Second)
	devServerAt(t, cli, port, db)
	time.Sleep(8 * time.Second)
	for _, pid := range first {
		if !isRunning(pid) {
			t.Errorf("agent %s did not survive the dev server's restart", pid)
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	landedOnce(t, c, run, repo, integration(run.GetID()))
	if got := pids(); len(got) != 4 {
		t.Errorf("%d agents ran for 4 atoms: %v", len(got), got)
	}
}
