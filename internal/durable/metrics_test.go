package durable

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/temporaltest"
)

// scrape is a GET of url: its status and body.
func scrape(t *testing.T, url string) (int, string) { return temporaltest.Get(t, url) }

// sample is the value of the series name{labels} in a scrape (labels as
// Prometheus prints them: sorted, quoted); -1 when absent.
func sample(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// The SDK's counters, gauges and timers reach the scrape with their tags
// as labels, one series per set of tags, even when one metric carries
// different tags in different places.
func TestSDKMetricsInPrometheus(t *testing.T) {
	m := NewMetrics()
	root := m.SDK().WithTags(map[string]string{"namespace": "default"})
	root.Counter("temporal_request").Inc(3)
	root.Counter("temporal_request").Inc(2)
	poll := root.WithTags(map[string]string{"operation": "PollActivityTaskQueue"})
	poll.Counter("temporal_request").Inc(1)
	poll.Counter("temporal_request").Inc(-4) // a counter never goes down
	root.WithTags(map[string]string{"namespace": "other", "task-queue": "q"}).Gauge("temporal_worker_task_slots_available").Update(7)
	timer := root.Timer("temporal_activity_execution_latency")
	timer.Record(200 * time.Millisecond)
	timer.Record(2 * time.Second)
	root.Gauge("temporal_request").Update(9) // a name already a counter: dropped, the rest still served
	root.WithTags(map[string]string{"le": "x"}).Timer("odd").Record(time.Second)

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	code, text := scrape(t, srv.URL)
	if code != http.StatusOK {
		t.Fatalf("status %d:\n%s", code, text)
	}
	for series, want := range map[string]float64{
		`temporal_request{namespace="default"}`:                                             5,
		`temporal_request{namespace="default",operation="PollActivityTaskQueue"}`:           1,
		`temporal_worker_task_slots_available{namespace="other",task_queue="q"}`:            7,
		`temporal_activity_execution_latency_seconds_bucket{namespace="default",le="0.1"}`:  0,
		`temporal_activity_execution_latency_seconds_bucket{namespace="default",le="0.25"}`: 1,
		`temporal_activity_execution_latency_seconds_bucket{namespace="default",le="2.5"}`:  2,
		`temporal_activity_execution_latency_seconds_count{namespace="default"}`:            2,
		`temporal_activity_execution_latency_seconds_sum{namespace="default"}`:              2.2,
		`odd_seconds_count{namespace="default",tagle="x"}`:                                  1,
		`aot_attempts_started_total{role="worker"}`:                                         -1, // none yet
	} {
		if got := sample(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if sample(text, "go_goroutines") <= 0 {
		t.Errorf("no Go runtime metrics:\n%s", text)
	}
	if strings.Count(text, "# TYPE temporal_request ") != 1 || !strings.Contains(text, "# TYPE temporal_request counter") {
		t.Errorf("temporal_request is not one counter family:\n%s", text)
	}
}
