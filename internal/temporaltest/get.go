package temporaltest

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// Get returns the status and body of a GET of url (a worker's /metrics or
// /healthz), within 10 seconds.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}
