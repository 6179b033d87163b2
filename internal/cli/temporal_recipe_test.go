//go:build temporal && unix

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docWorker is how docs/TEMPORAL.md starts a worker: its arguments after
// the aot command, and the environment it sets.
type docWorker struct {
	from string // the recipe: "systemd unit", "Dockerfile"
	args []string
	env  []string
}

// docCodeBlocks are the fenced code blocks of docs/TEMPORAL.md in lang.
func docCodeBlocks(t *testing.T, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "TEMPORAL.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	parts := strings.Split(string(data), "```")
	for i := 1; i < len(parts); i += 2 {
		if body, ok := strings.CutPrefix(parts[i], lang+"\n"); ok {
			blocks = append(blocks, body)
		}
	}
	return blocks
}

// docWorkers reads the systemd unit and the Dockerfile of
// docs/TEMPORAL.md, checking what must hold between their lines: the
// unit's stop timeout longer than the worker's --grace, SIGTERM as the
// stop signal, and only connection variables aot reads.
func docWorkers(t *testing.T) []docWorker {
	t.Helper()
	var unit, image *docWorker
	for _, b := range docCodeBlocks(t, "ini") {
		if !strings.Contains(b, "[Service]") {
			continue
		}
		unit = &docWorker{from: "systemd unit"}
		stop, signal := "", ""
		for _, line := range strings.Split(b, "\n") {
			key, value, _ := strings.Cut(line, "=")
			switch key {
			case "ExecStart":
				f := strings.Fields(value)
				if len(f) < 2 || filepath.Base(f[0]) != "aot" || f[1] != "worker" {
					t.Fatalf("the unit's ExecStart is not aot worker: %s", value)
				}
				unit.args = f[1:]
			case "Environment":
				unit.env = append(unit.env, value)
			case "TimeoutStopSec":
				stop = value
			case "KillSignal":
				signal = value
			}
		}
		if signal != "SIGTERM" {
			t.Errorf("the unit's KillSignal is %q, want SIGTERM", signal)
		}
		grace, err := time.ParseDuration(flagValue(unit.args, "--grace"))
		secs, err2 := strconv.Atoi(stop)
		if err != nil || err2 != nil || time.Duration(secs)*time.Second <= grace {
			t.Errorf("the unit's TimeoutStopSec=%s is not longer than its --grace %s", stop, grace)
		}
	}
	for _, b := range docCodeBlocks(t, "dockerfile") {
		image = &docWorker{from: "Dockerfile"}
		var entry, cmd []string
		for _, line := range strings.Split(b, "\n") {
			word, rest, _ := strings.Cut(line, " ")
			var err error
			switch word {
			case "ENTRYPOINT":
				err = json.Unmarshal([]byte(rest), &entry)
			case "CMD":
				err = json.Unmarshal([]byte(rest), &cmd)
			case "ENV":
				image.env = append(image.env, strings.Fields(rest)...)
			case "STOPSIGNAL":
				if rest != "SIGTERM" {
					t.Errorf("the Dockerfile's STOPSIGNAL is %q, want SIGTERM", rest)
				}
			}
			if err != nil {
				t.Fatalf("the Dockerfile's %s: %v", line, err)
			}
		}
		if len(entry) != 1 || entry[0] != "aot" || len(cmd) == 0 || cmd[0] != "worker" {
			t.Fatalf("the Dockerfile does not run aot worker: ENTRYPOINT %q CMD %q", entry, cmd)
		}
		image.args = cmd
	}
	if unit == nil || image == nil {
		t.Fatal("docs/TEMPORAL.md lacks the systemd unit (an ini block with [Service]) or the Dockerfile")
	}
	for _, w := range []*docWorker{unit, image} {
		for _, kv := range w.env {
			name, _, _ := strings.Cut(kv, "=")
			if !strings.HasPrefix(name, "TEMPORAL_") || !strings.Contains(workerLong, name) {
				t.Errorf("the %s sets %s, which aot worker does not read", w.from, name)
			}
		}
	}
	return []docWorker{*unit, *image}
}

// flagValue is the value of the last --name V or --name=V in args.
func flagValue(args []string, name string) string {
	v := ""
	for i, a := range args {
		if a == name && i+1 < len(args) {
			v = args[i+1]
		} else if rest, ok := strings.CutPrefix(a, name+"="); ok {
			v = rest
		}
	}
	return v
}

// workerEndpoints is where a worker serves /metrics and /healthz, read from
// the line it prints when it polls.
func workerEndpoints(t *testing.T, out string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "metrics on http://")
	addr, _, _ := strings.Cut(rest, "/metrics")
	if !ok || addr == "" {
		t.Fatalf("the worker did not say where its metrics are:\n%s", out)
	}
	return "http://" + addr
}

// counted sums the samples in a Prometheus scrape whose series starts
// with prefix (a name, or a name and its first labels).
func counted(scrape, prefix string) float64 {
	sum := 0.0
	for _, line := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(line, prefix) {
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				v, _ := strconv.ParseFloat(line[i+1:], 64)
				sum += v
			}
		}
	}
	return sum
}
