//go:build !windows

package agent

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/proc"
)

// runWithTree runs one worker attempt and returns what WithStart reported.
func runWithTree(t *testing.T, e *Exec, task Task) (Result, error, proc.Tree) {
	t.Helper()
	var tree proc.Tree
	calls := 0
	ctx := WithStart(context.Background(), func(tr proc.Tree) { tree = tr; calls++ })
	r, err := e.Run(ctx, task)
	if calls != 1 || tree.PGID <= 0 || tree.Token == "" {
		t.Fatalf("start notified %d times with %+v", calls, tree)
	}
	return r, err, tree
}

// TestExecBackgroundChildDoesNotHoldTheAnswer: the answer is read when the
// agent's own process exits, however its background children hold stdout,
// and they are dead when Run returns.
func TestExecBackgroundChildDoesNotHoldTheAnswer(t *testing.T) {
	for _, script := range []string{
		`sleep 1000 & echo '{"success":true}'`,
		`setsid sleep 1000 & echo '{"success":true}'`,
		`(sleep 1000 &) & echo '{"success":true}'`,
	} {
		t.Run(script, func(t *testing.T) {
			start := time.Now()
			r, err, tree := runWithTree(t, &Exec{Command: script, Timeout: time.Minute}, Task{Role: Worker, Workdir: t.TempDir()})
			// Far below the child's 1000 s: the answer does not wait for it
			// (a loaded machine may take seconds to kill a tree).
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the answer took %v", d)
			}
			if err != nil || !r.Success {
				t.Fatalf("%+v, %v", r, err)
			}
			if proc.Alive(tree) {
				t.Fatal("a background child outlived the attempt")
			}
		})
	}
}

// TestExecStdoutOverflow: an endless writer is stopped at 16 MiB, with the
// memory that takes, and its whole tree is killed.
func TestExecStdoutOverflow(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "log")
	e := &Exec{
		Command: `sleep 1000 & yes`,
		Timeout: time.Minute,
		Log:     func(Task) (io.WriteCloser, error) { return os.Create(logPath) },
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err, tree := runWithTree(t, e, Task{Role: Worker, Workdir: dir})
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	var ae *AttemptError
	if !errors.As(err, &ae) || ae.Reason != "agent wrote more than 16 MiB to stdout" {
		t.Fatalf("err = %v", err)
	}
	if d > 10*time.Second {
		t.Errorf("overflow took %v to stop", d)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 128<<20 {
		t.Errorf("reading the output allocated %d MiB", alloc>>20)
	}
	if proc.Alive(tree) {
		t.Fatal("tree alive after an overflow")
	}
	log, _ := os.ReadFile(logPath)
	if len(log) > maxLoggedStdout+200 || !strings.HasPrefix(string(log), "--- stdout ---\ny\ny\n") ||
		!strings.HasSuffix(string(log), "--- stdout truncated: first 65536 of more than 16777216 bytes ---\n") {
		t.Errorf("log of %d bytes: %q...%q", len(log), log[:min(len(log), 30)], log[max(0, len(log)-100):])
	}
}

// TestExecStderrCapped: stderr beyond 16 MiB is dropped with a marker and
// does not fail the attempt.
func TestExecStderrCapped(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "log")
	e := &Exec{
		Command: `head -c 17000000 /dev/zero >&2; echo '{"success":true}'`,
		Timeout: time.Minute,
		Log:     func(Task) (io.WriteCloser, error) { return os.Create(logPath) },
	}
	r, err := e.Run(context.Background(), Task{Role: Worker, Workdir: dir})
	if err != nil || !r.Success {
		t.Fatalf("%+v, %v", r, err)
	}
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	marker := "\n--- stderr truncated after 16777216 bytes ---\n"
	if want := int64(maxStderr + len(marker) + len("--- stdout ---\n{\"success\":true}\n")); fi.Size() != want {
		t.Fatalf("log is %d bytes, want %d", fi.Size(), want)
	}
	f, _ := os.Open(logPath)
	defer f.Close()
	tail := make([]byte, 200)
	n, _ := f.ReadAt(tail, fi.Size()-200)
	if !strings.Contains(string(tail[:n]), marker+"--- stdout ---\n") {
		t.Fatalf("log ends %q", tail[:n])
	}
}

// TestExecMalformedAnswerQuotesOutput: the reason shows what was printed,
// on one line, bounded and cut at a word, in the words every backend uses.
func TestExecMalformedAnswerQuotesOutput(t *testing.T) {
	_, err := (&Exec{Command: `echo hello world`}).Run(context.Background(), Task{Role: Worker, Workdir: t.TempDir()})
	want := `malformed answer: the answer is not one JSON object: invalid character 'h' looking for beginning of value; the worker said: "hello world"`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	_, err = (&Exec{Command: `for i in $(seq 100); do echo "line é $i"; done`}).Run(context.Background(), Task{Role: Worker, Workdir: t.TempDir()})
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, `; the worker said: "line é 1 line é 2 line`) ||
		!strings.HasSuffix(msg, `…" (1091 bytes in all)`) || strings.Contains(msg, " l…") || len(msg) > 400 {
		t.Fatalf("reason %q", msg)
	}
	_, err = (&Exec{Command: `true`}).Run(context.Background(), Task{Role: Worker, Workdir: t.TempDir()})
	if err == nil || err.Error() != "malformed answer: no JSON object in the answer; the worker said: nothing" {
		t.Fatalf("err = %v", err)
	}
}

const usageLines = `echo '{"input_tokens":1,"output_tokens":2,"cost_usd":0.25}' >> "$AOT_USAGE_FILE"; ` +
	`echo '{"input_tokens":10,"output_tokens":20,"cost_usd":0.5}' >> "$AOT_USAGE_FILE"; `

func sameUsage(a, b Usage) bool {
	return a.InputTokens == b.InputTokens && a.OutputTokens == b.OutputTokens &&
		math.Abs(a.CostUSD-b.CostUSD) < 1e-9 && a.Known == b.Known
}

// TestExecUsage: the usage file, appended during the attempt, wins over the
// answer, survives a crash or a timeout, and is removed afterwards.
func TestExecUsage(t *testing.T) {
	fromFile := Usage{InputTokens: 11, OutputTokens: 22, CostUSD: 0.75, Known: true}
	tests := []struct {
		name    string
		command string
		want    Usage
		fails   string
	}{
		{"crash", usageLines + `kill -9 $$`, fromFile, "signal: killed"},
		{"timeout", usageLines + `sleep 1000`, fromFile, "timed out"},
		{"answer only", `echo '{"success":true,"usage":{"input_tokens":5,"output_tokens":6,"cost_usd":0.125}}'`, Usage{InputTokens: 5, OutputTokens: 6, CostUSD: 0.125, Known: true}, ""},
		{"file wins", usageLines + `printf '{"input_tok' >> "$AOT_USAGE_FILE"; echo '{"success":true,"usage":{"input_tokens":5,"output_tokens":6,"cost_usd":0.125}}'`, fromFile, ""},
		{"none", `echo '{"success":true}'`, Usage{}, ""},
		{"failed answer's own usage", `echo '{"success":true,"usage":{"input_tokens":5}}'; exit 2`, Usage{InputTokens: 5, Known: true}, "exit status 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var path string
			e := &Exec{Command: `echo "$AOT_USAGE_FILE" > usage-path; ` + tc.command, Timeout: 500 * time.Millisecond}
			dir := t.TempDir()
			r, err := e.Run(context.Background(), Task{Role: Worker, Workdir: dir})
			got := r.Usage
			if tc.fails != "" {
				var ae *AttemptError
				if !errors.As(err, &ae) || !strings.Contains(ae.Reason, tc.fails) {
					t.Fatalf("err = %v", err)
				}
				got = ae.Usage
			} else if err != nil {
				t.Fatal(err)
			}
			if !sameUsage(got, tc.want) {
				t.Errorf("usage %+v, want %+v", got, tc.want)
			}
			data, err := os.ReadFile(filepath.Join(dir, "usage-path"))
			if path = strings.TrimSpace(string(data)); err != nil || path == "" {
				t.Fatalf("AOT_USAGE_FILE not set: %v", err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("usage file %s left behind: %v", path, err)
			}
		})
	}
}

func TestSumUsage(t *testing.T) {
	in := strings.Join([]string{
		`{"input_tokens":1,"output_tokens":2,"cost_usd":0.5}`,
		``,
		`not json`,
		`{"input_tokens":-1}`,
		`{"input_tokens":1.5}`,
		`{"other":1}`,
		`[1,2]`,
		`{"cost_usd":0.25}`,
		`{"input_tokens":` + strings.Repeat(" ", maxUsageLine) + `1}`,
		`  {"output_tokens":3, "model":"x"}  `,
		`{"input_tokens":100`, // torn
	}, "\n")
	if got, want := sumUsage(strings.NewReader(in)), (Usage{InputTokens: 1, OutputTokens: 5, CostUSD: 0.75, Known: true}); !sameUsage(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := sumUsage(strings.NewReader("garbage\n{}\n")); got.Known {
		t.Fatalf("no valid line, yet %+v", got)
	}
}

func TestDecodeUsageKnown(t *testing.T) {
	for data, known := range map[string]bool{
		`{"success":true}`:                        false,
		`{"success":true,"usage":null}`:           false,
		`{"success":true,"usage":{}}`:             true,
		`{"success":true,"usage":{"cost_usd":1}}`: true,
		`{"usage_limit":true,"usage":{}}`:         true,
	} {
		r, err := Decode(Worker, []byte(data))
		if err != nil || r.Usage.Known != known {
			t.Errorf("%s: known %v, err %v", data, r.Usage.Known, err)
		}
	}
}
