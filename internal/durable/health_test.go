//go:build unix

package durable

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/engine"
)

// tcpProxy forwards connections from a loopback port to target until it
// is cut: then it closes every connection and refuses new ones, as a
// Temporal service that went away; mend listens again on the same port.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target}
	p.listen("127.0.0.1:0")
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) mend() { p.listen(p.addr) }

// healthz polls url until its status is want (at most d), and returns the
// last body.
func healthz(t *testing.T, url string, want int, d time.Duration) string {
	t.Helper()
	var code int
	var body string
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		code, body = scrape(t, url)
		if code == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d within %s, want %d: %s", url, code, d, want, body)
		}
	}
}

// A worker with a metrics listener: /healthz says 200 while it polls and
// the Temporal service answers, 503 while the service is unreachable and
// again once the worker stops; /metrics counts its attempts, merges and
// verifications beside the SDK's own metrics; Temporal sees its build id.
func TestWorkerMetricsHealthAndBuildID(t *testing.T) {
	dev := devServer(t)
	proxy := newTCPProxy(t, dev)
	t.Setenv("TEMPORAL_ADDRESS", proxy.addr)
	t.Setenv("TEMPORAL_NAMESPACE", "default")
	m := NewMetrics()
	wc, err := DialWith(context.Background(), DialOptions{Metrics: m.SDK()})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()

	const queue, build = "metered", "test-build-7"
	ctx, cancel := context.WithCancel(context.Background())
	started, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- RunWorker(ctx, WorkerOptions{Client: wc, TaskQueue: queue, CacheDir: t.TempDir(), Identity: "metered",
			NewAgent: execAgents, Heartbeat: time.Second, Grace: 3 * time.Second,
			Listener: ln, Metrics: m, BuildID: build, Started: func(string) { close(started) }})
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the worker did not start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the worker did not start within a minute")
	}
	if body := healthz(t, base+"/healthz", http.StatusOK, 10*time.Second); !strings.Contains(body, "build id "+build) || !strings.Contains(body, "task queue "+queue) {
		t.Errorf("/healthz body: %s", body)
	}

	c := dialDev(t, dev)
	repo, seed := newRemote(t, map[string]string{})
	run := startLoop(t, c, queue, repo, seed, writesItsFile(""))
	landedOnce(t, c, run, repo, integration(run.GetID()))
	_, text := scrape(t, base+"/metrics")
	for series, want := range map[string]float64{
		`aot_attempts_started_total{role="worker"}`:                  4,
		`aot_attempts_finished_total{outcome="ok",role="worker"}`:    4,
		`aot_merges_total{outcome="merged"}`:                         4,
		`aot_verifications_total{outcome="passed"}`:                  1,
		`aot_activities_running{activity="` + AttemptActivity + `"}`: 0,
	} {
		if got := sample(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for _, family := range []string{"temporal_request", "temporal_activity_execution_latency_seconds", "temporal_workflow_completed", "temporal_worker_start"} {
		if !strings.Contains(text, "# TYPE "+family+" ") || !strings.Contains(text, `task_queue="`+queue+`"`) {
			t.Errorf("no SDK metric %s for task queue %s in the scrape:\n%s", family, queue, text)
		}
	}

	// Temporal sees the worker's build id in its pollers.
	resp, err := c.WorkflowService().DescribeTaskQueue(context.Background(), &workflowservice.DescribeTaskQueueRequest{
		Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW})
	if err != nil {
		t.Fatal(err)
	}
	var builds []string
	for _, p := range resp.GetPollers() {
		builds = append(builds, p.GetDeploymentOptions().GetBuildId())
	}
	if len(builds) == 0 || builds[0] != build {
		t.Errorf("the queue's pollers report build ids %q, want %s", builds, build)
	}
	// And the loop's history names it on each workflow task.
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	tasks := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			tasks++
			if v := a.GetDeploymentVersion(); v.GetBuildId() != build || v.GetDeploymentName() != DeploymentName {
				t.Errorf("workflow task %d completed by %v, want build %s of %s", ev.GetEventId(), v, build, DeploymentName)
			}
		}
	}
	if tasks == 0 {
		t.Error("no workflow task in the loop's history")
	}

	// The service unreachable: 503 saying so; back: 200.
	proxy.cut()
	if body := healthz(t, base+"/healthz", http.StatusServiceUnavailable, 15*time.Second); !strings.Contains(body, "does not answer") {
		t.Errorf("/healthz with the service down: %s", body)
	}
	proxy.mend()
	healthz(t, base+"/healthz", http.StatusOK, 30*time.Second)

	// Stopping, with an attempt running: 503 while it has its grace;
	// the listener lives until RunWorker returns, then closes.
	held := "it-held-" + strings.ToLower(t.Name())
	gitT(t, repo, "branch", integration(held), seed)
	if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: held, TaskQueue: queue}, WorkflowName,
		LoopInput{Settings: engine.Settings{AgentTimeout: 2 * time.Minute}, State: fourAtoms(), Repo: repo, Base: integration(held), BaseCommit: seed,
			Agent: AgentChoice{Agent: "exec", Command: writesItsFile("sleep 60; ")}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, text := scrape(t, base+"/metrics")
		if sample(text, `aot_activities_running{activity="`+AttemptActivity+`"}`) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attempt of the held loop runs within a minute:\n%s", text)
		}
	}
	cancel()
	if body := healthz(t, base+"/healthz", http.StatusServiceUnavailable, 2*time.Second); !strings.Contains(body, "not polling: stopping") {
		t.Errorf("/healthz of a stopping worker: %s", body)
	}
	if err := <-done; err != nil {
		t.Errorf("RunWorker: %v", err)
	}
	done <- nil
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("/healthz still answers after the worker returned")
	}
}
