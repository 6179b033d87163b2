//go:build unix

package durable

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

	dir := t.TempDir()
	ran, gate := filepath.Join(dir, "ran"), filepath.Join(dir, "gate")
	hold := `echo $$ >> ` + ran + `; i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; `
	run := startLoop(t, c, queue, repo, seed, writesItsFile(hold))
	pids := func() []string {
		data, _ := os.ReadFile(ran)
		return strings.Fields(string(data))
	}
	waitFor(t, "two agents run on the first worker", 60*time.Second, func() bool { return len(pids()) == 2 })
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
	if gaveUp < 15*time.Second {
		t.Errorf("the cut-off worker gave its attempts up %s after the cut: the heartbeat timeout is 30s", gaveUp)
	}
	t.Logf("the cut-off worker gave its attempts up %s after the cut; both retries started by %s", gaveUp.Round(time.Millisecond), time.Since(cut).Round(time.Millisecond))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	landedOnce(t, c, run, repo, integration(run.GetID()))
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
