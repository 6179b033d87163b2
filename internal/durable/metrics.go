package durable

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/aot-loop/aot/internal/agent"
)

// Metrics are a worker's numbers for Prometheus: the Temporal SDK's own
// (give [Metrics.SDK] to the client, see [DialWith]) and aot's, counted
// as the worker runs activities (see WorkerOptions.Metrics):
//
//   - aot_attempts_started_total{role}
//   - aot_attempts_finished_total{role,outcome}: outcome is "ok", "no" (the
//     agent answered, and its answer was no: a worker that did not succeed,
//     a probe that found the atom infeasible), an attempt failure kind
//     (crash, timeout, rate_limited, ...), "cancelled", or "error" (the
//     worker's own failure, which Temporal retries)
//   - aot_activity_failures_total{activity}: activities that ended in an
//     error (the infrastructure's: Temporal retries them)
//   - aot_merges_total{outcome}: "merged", "conflict" or "error"
//   - aot_verifications_total{outcome}: "passed", "failed" or "error"
//   - aot_activities_running{activity}
//
// The SDK's timers are histograms in seconds, named with a _seconds suffix
// (temporal_activity_execution_latency_seconds).
type Metrics struct {
	reg              *prometheus.Registry
	sdk              *sdkMetrics
	attemptsStarted  *prometheus.CounterVec
	attemptsFinished *prometheus.CounterVec
	failures         *prometheus.CounterVec
	merges           *prometheus.CounterVec
	verifications    *prometheus.CounterVec
	running          *prometheus.GaugeVec
}

// NewMetrics makes an empty set of metrics, with the Go runtime's and the
// process's own.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		sdk: &sdkMetrics{series: map[string]prometheus.Collector{}, kinds: map[string]string{}},
		attemptsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aot_attempts_started_total", Help: "Agent attempts this worker started, by role.",
		}, []string{"role"}),
		attemptsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aot_attempts_finished_total", Help: "Agent attempts this worker finished, by role and outcome (ok, no, a failure kind, cancelled, error).",
		}, []string{"role", "outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aot_activity_failures_total", Help: "Activities that ended in an error Temporal retries, by activity.",
		}, []string{"activity"}),
		merges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aot_merges_total", Help: "Merges into integration branches, by outcome (merged, conflict, error).",
		}, []string{"outcome"}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aot_verifications_total", Help: "Base-case verifications, by outcome (passed, failed, error).",
		}, []string{"outcome"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aot_activities_running", Help: "Activities running on this worker now, by activity.",
		}, []string{"activity"}),
	}
	m.reg.MustRegister(m.sdk, m.attemptsStarted, m.attemptsFinished, m.failures, m.merges, m.verifications, m.running,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SDK is the handler the Temporal client reports its metrics to.
func (m *Metrics) SDK() client.MetricsHandler { return promHandler{m.sdk, nil} }

// Handler serves the metrics in Prometheus's text format. One metric that
// cannot be gathered does not hide the others.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// interceptor counts the activities a worker runs.
func (m *Metrics) interceptor() interceptor.WorkerInterceptor { return &meteredWorker{m: m} }

type meteredWorker struct {
	interceptor.WorkerInterceptorBase
	m *Metrics
}

func (w *meteredWorker) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &meteredActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, m: w.m}
}

type meteredActivity struct {
	interceptor.ActivityInboundInterceptorBase
	m *Metrics
}

func (a *meteredActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	name := activity.GetInfo(ctx).ActivityType.Name
	role := ""
	if name == AttemptActivity && len(in.Args) > 0 {
		if ai, ok := in.Args[0].(AttemptInput); ok {
			role = string(ai.Task.Role)
		}
		a.m.attemptsStarted.WithLabelValues(role).Inc()
	}
	a.m.running.WithLabelValues(name).Inc()
	out, err := a.Next.ExecuteActivity(ctx, in)
	a.m.running.WithLabelValues(name).Dec()
	if err != nil {
		a.m.failures.WithLabelValues(name).Inc()
	}
	switch name {
	case AttemptActivity:
		a.m.attemptsFinished.WithLabelValues(role, attemptOutcome(ctx, agent.Role(role), out, err)).Inc()
	case MergeActivity:
		outcome := "error"
		if err == nil {
			outcome = "merged"
			if r, ok := out.(MergeResult); ok && r.Conflict {
				outcome = "conflict"
			}
		}
		a.m.merges.WithLabelValues(outcome).Inc()
	case MergeBatchActivity:
		r, ok := out.(MergeBatchResult)
		if err != nil || !ok {
			a.m.merges.WithLabelValues("error").Inc()
			break
		}
		for _, m := range r.Atoms {
			outcome := "merged"
			switch {
			case m.Error != "":
				outcome = "error"
			case m.Conflict:
				outcome = "conflict"
			}
			a.m.merges.WithLabelValues(outcome).Inc()
		}
	case VerifyActivity:
		outcome := "error"
		if r, ok := out.(VerifyResult); ok && err == nil {
			outcome = "failed"
			if r.Report.Passed {
				outcome = "passed"
			}
		}
		a.m.verifications.WithLabelValues(outcome).Inc()
	}
	return out, err
}

// attemptOutcome names how an attempt ended, for aot_attempts_finished_total.
func attemptOutcome(ctx context.Context, role agent.Role, out any, err error) string {
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return "cancelled"
		}
		return "error"
	}
	r, ok := out.(AttemptResult)
	switch {
	case !ok:
		return "error"
	case r.Kind != "":
		return string(r.Kind)
	case role != "" && !r.Result.OK(role):
		return "no"
	}
	return "ok"
}

// sdkMetrics holds the series the Temporal SDK reports, one collector per
// name and set of tags. The SDK gives one metric different tags in
// different places, so the series are collected unchecked (Describe sends
// nothing) and each carries its tags as constant labels.
type sdkMetrics struct {
	mu     sync.Mutex
	series map[string]prometheus.Collector // by kind, name and tags
	kinds  map[string]string               // a name's kind: the first one asked for wins
}

func (s *sdkMetrics) Describe(chan<- *prometheus.Desc) {}

func (s *sdkMetrics) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	cs := slices.Collect(maps.Values(s.series))
	s.mu.Unlock()
	for _, c := range cs {
		c.Collect(ch)
	}
}

// timerBuckets span what the SDK times: requests of milliseconds to
// activities (agents) of an hour.
var timerBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// get returns the series of name with tags, made by mk the first time; nil
// when name is already a metric of another kind.
func (s *sdkMetrics) get(kind, name string, tags map[string]string, mk func(prometheus.Opts) prometheus.Collector) prometheus.Collector {
	name = promName(name)
	keys := slices.Sorted(maps.Keys(tags))
	var b strings.Builder
	b.WriteString(kind + " " + name)
	for _, k := range keys {
		b.WriteString("\x00" + k + "=" + tags[k])
	}
	key := b.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.series[key]; ok {
		return c
	}
	if k, ok := s.kinds[name]; ok && k != kind {
		return nil
	}
	s.kinds[name] = kind
	labels := prometheus.Labels{}
	for k, v := range tags {
		if k = promName(k); k == "le" || k == "quantile" || strings.HasPrefix(k, "__") {
			k = "tag" + k // Prometheus keeps these names for itself
		}
		labels[k] = v
	}
	c := mk(prometheus.Opts{Name: name, Help: "Temporal SDK " + kind + " " + name + ".", ConstLabels: labels})
	s.series[key] = c
	return c
}

// promName makes s a valid Prometheus metric or label name.
func promName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' && i > 0) {
			b[i] = '_'
		}
	}
	return string(b)
}

// promHandler is the Temporal SDK's MetricsHandler over sdkMetrics.
type promHandler struct {
	s    *sdkMetrics
	tags map[string]string
}

func (h promHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return promHandler{h.s, merged}
}

func (h promHandler) Counter(name string) client.MetricsCounter {
	c, _ := h.s.get("counter", name, h.tags, func(o prometheus.Opts) prometheus.Collector {
		return prometheus.NewCounter(prometheus.CounterOpts(o))
	}).(prometheus.Counter)
	return counterFunc(func(d int64) {
		if c != nil && d > 0 {
			c.Add(float64(d))
		}
	})
}

func (h promHandler) Gauge(name string) client.MetricsGauge {
	g, _ := h.s.get("gauge", name, h.tags, func(o prometheus.Opts) prometheus.Collector {
		return prometheus.NewGauge(prometheus.GaugeOpts(o))
	}).(prometheus.Gauge)
	return gaugeFunc(func(v float64) {
		if g != nil {
			g.Set(v)
		}
	})
}

func (h promHandler) Timer(name string) client.MetricsTimer {
	t, _ := h.s.get("timer", name+"_seconds", h.tags, func(o prometheus.Opts) prometheus.Collector {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: o.Name, Help: o.Help, ConstLabels: o.ConstLabels, Buckets: timerBuckets})
	}).(prometheus.Histogram)
	return timerFunc(func(d time.Duration) {
		if t != nil {
			t.Observe(d.Seconds())
		}
	})
}

type (
	counterFunc func(int64)
	gaugeFunc   func(float64)
	timerFunc   func(time.Duration)
)

func (f counterFunc) Inc(d int64)          { f(d) }
func (f gaugeFunc) Update(v float64)       { f(v) }
func (f timerFunc) Record(d time.Duration) { f(d) }
