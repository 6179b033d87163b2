package durable

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// DeploymentName is the Temporal worker deployment aot workers report
// their build ids in.
const DeploymentName = "aot"

// serve starts the worker's health and metrics endpoints on o.Listener,
// when set; the worker is "starting" until it polls.
func (o WorkerOptions) serve() (*health, func()) {
	hl := &health{client: o.Client, why: "starting",
		what: fmt.Sprintf("task queue %s, identity %s, build id %s", o.TaskQueue, o.Identity, o.BuildID)}
	if o.Listener == nil {
		return hl, func() {}
	}
	return hl, serveHTTP(o.Listener, hl, o.Metrics)
}

// observed adds to wo what the metrics, the health and the build id need:
// the activities counted, a fatal error marked unhealthy, the build id
// reported as the worker's deployment version. The versioning mode stays
// unversioned (workflows are not pinned to a build), so it needs no
// server-side setup and any worker on the queue runs any loop.
func (o WorkerOptions) observed(hl *health, wo worker.Options) worker.Options {
	wo.OnFatalError = func(err error) { hl.set(false, "the worker stopped: "+err.Error()) }
	if o.Metrics != nil {
		wo.Interceptors = append(wo.Interceptors, o.Metrics.interceptor())
	}
	if o.BuildID != "" {
		wo.DeploymentOptions = worker.DeploymentOptions{Version: worker.WorkerDeploymentVersion{DeploymentName: DeploymentName, BuildID: o.BuildID}}
	}
	return wo
}

// healthTimeout bounds the Temporal health check behind one /healthz.
const healthTimeout = 2 * time.Second

// health is what a worker's /healthz answers: 200 while the worker polls
// its task queue and the Temporal service answers a health check, 503 with
// the reason otherwise (starting, stopping, stopped by an error, or the
// service unreachable). A supervisor should take a 503 as "not ready", not
// as "restart me": a worker whose service is down carries on by itself
// when the service is back.
type health struct {
	client client.Client
	what   string // the worker, for the body: task queue, identity, build id

	mu      sync.Mutex
	polling bool
	why     string // why not, when not polling
}

// set records whether the worker polls, and why not.
func (h *health) set(polling bool, why string) {
	h.mu.Lock()
	h.polling, h.why = polling, why
	h.mu.Unlock()
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	polling, why := h.polling, h.why
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !polling {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not polling: %s (%s)\n", why, h.what)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if _, err := h.client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "the Temporal service does not answer: %v (%s)\n", err, h.what)
		return
	}
	fmt.Fprintf(w, "ok: polling (%s)\n", h.what)
}

// serveHTTP serves /healthz, and /metrics when m is set, on l until the
// returned func is called.
func serveHTTP(l net.Listener, h *health, m *Metrics) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", h)
	if m != nil {
		mux.Handle("GET /metrics", m.Handler())
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.set(false, "the health listener failed: "+err.Error())
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
		<-done
	}
}
