//go:build temporal && unix

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/aot-loop/aot/internal/durable"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/temporaltest"
)

// waitFor waits up to within for cmd to exit and returns how it exited
// and how long that took.
func waitFor(t *testing.T, name string, cmd *exec.Cmd, out *lockedBuffer, within time.Duration) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(within):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not end within %s:\n%s", name, within, out)
	}
	return nil, 0
}

// envOf reads a variable of the environment a started aot process got.
func envOf(cmd *exec.Cmd, name string) string {
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// A loop on a task queue no worker polls: aot run says so within 10
// seconds and again while it lasts, aot status answers at once from the
// state file saying why, aot stop says the workflow has not closed and
// fails; once a worker polls, aot run says so and the stop asked before
// is carried out.
func TestTemporalNoWorkerIsSaid(t *testing.T) {
	start := aotProcesses(t)
	root, _, ws, _ := temporalProject(t, "a loop nobody serves yet", "test -f A.txt", 1, state.Atom{ID: "A", Description: "write A.txt"})
	const queue = "nobody-polls"
	agent := `echo A > A.txt && echo '{"success": true, "summary": "wrote A"}'`

	run, out := start("aot run", ws, "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec")
	until(t, "the workflow starts", 60*time.Second, func() bool { return strings.Contains(out.String(), "started workflow ") })
	until(t, "aot run says no worker polls", 10*time.Second, func() bool {
		return strings.Contains(out.String(), "no worker polls task queue "+queue+": the loop waits until one does")
	})

	// aot status: bounded, from the state file, saying why.
	st, stOut := start("aot status", ws, "status")
	err, took := waitFor(t, "aot status", st, stOut, 30*time.Second)
	if err != nil || took > 15*time.Second {
		t.Errorf("aot status: %v after %s\n%s", err, took, stOut)
	}
	for _, want := range []string{"no worker polls task queue " + queue, "a loop nobody serves yet", "engine on Temporal, workflow aot-", "none polls task queue " + queue + ": start one with aot worker --task-queue " + queue} {
		if !strings.Contains(stOut.String(), want) {
			t.Errorf("aot status does not say %q:\n%s", want, stOut)
		}
	}
	js, jsOut := start("aot status --json", ws, "status", "--json")
	if err, _ := waitFor(t, "aot status --json", js, jsOut, 30*time.Second); err != nil {
		t.Fatalf("aot status --json: %v\n%s", err, jsOut)
	}
	doc := jsOut.String()
	var got struct {
		Workflow *workflowDoc `json:"workflow"`
	}
	if err := json.Unmarshal([]byte(doc[strings.Index(doc, "{"):]), &got); err != nil || got.Workflow == nil || !got.Workflow.NoWorker || got.Workflow.Status != "Running" {
		t.Errorf("aot status --json: %v, workflow %+v\n%s", err, got.Workflow, doc)
	}

	// aot redirect: refused at once (an Update would wait for a worker);
	// aot pause: the signal is kept, and the wait said.
	rd, rdOut := start("aot redirect", ws, "redirect", "--reason", "more", "--max-iterations", "50")
	err, took = waitFor(t, "aot redirect", rd, rdOut, 40*time.Second)
	if err == nil || took > 15*time.Second || !strings.Contains(rdOut.String(), "no worker polls task queue "+queue) {
		t.Errorf("aot redirect without a worker: %v after %s\n%s", err, took, rdOut)
	}
	pa, paOut := start("aot pause", ws, "pause")
	err, took = waitFor(t, "aot pause", pa, paOut, 40*time.Second)
	if err != nil || took > 15*time.Second || !strings.Contains(paOut.String(), "the signal is recorded, but no worker polls task queue "+queue) {
		t.Errorf("aot pause without a worker: %v after %s\n%s", err, took, paOut)
	}

	// aot stop: the workflow cannot close; said, and a failure.
	sp, spOut := start("aot stop", ws, "stop", "--reason", "nobody serves it")
	err, took = waitFor(t, "aot stop", sp, spOut, 60*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || took > 20*time.Second {
		t.Errorf("aot stop without a worker: %v after %s, want exit 1 at once\n%s", err, took, spOut)
	}
	for _, want := range []string{"has not closed", "no worker polls task queue " + queue, "temporal workflow terminate"} {
		if !strings.Contains(spOut.String(), want) {
			t.Errorf("aot stop does not say %q:\n%s", want, spOut)
		}
	}
	if strings.Contains(out.String(), "stopped (") {
		t.Fatalf("the loop ended without a worker:\n%s", out)
	}

	// The absence is said again while it lasts.
	until(t, "aot run says it again", 45*time.Second, func() bool {
		return strings.Contains(out.String(), "no worker polls task queue "+queue+" (for ")
	})

	// A worker polls: said; the stop asked is carried out.
	_, wOut := start("worker", ws, "worker", "--task-queue", queue, "--cache", filepath.Join(root, "cache"), "--identity", "late-worker", "--grace", "1s", "--agent-command", agent)
	until(t, "aot run sees the worker", 30*time.Second, func() bool {
		return strings.Contains(out.String(), "worker late-worker polls task queue "+queue+" now") || strings.Contains(out.String(), "stopped (")
	})
	if err, _ := waitFor(t, "aot run", run, out, 90*time.Second); err == nil {
		t.Errorf("aot run of a stopped loop exited 0:\n%s", out)
	}
	if !strings.Contains(out.String(), "stopped (manual_stop)") {
		t.Errorf("aot run does not show the stop:\n%s", out)
	}
	// The worker's SDK log is on (info by default): it says it started.
	if !strings.Contains(wOut.String(), "from=temporal-sdk") {
		t.Errorf("the worker printed no SDK log:\n%s", wOut)
	}
}

// aot codec-server lets the Temporal CLI read a loop's payloads; the
// workflow's memo names the loop; activity ids name atom and attempt.
func TestTemporalCodecServerMemoAndActivityIDs(t *testing.T) {
	start := aotProcesses(t)
	root, remote, ws, sf := temporalProject(t, "files for the codec", "test -f A.txt", 1, state.Atom{ID: "A", Description: "paint the zebra-quartz fence"})
	const queue = "codec"
	agent := `echo A > A.txt && echo '{"success": true, "summary": "wrote A"}'`
	_, wOut := start("worker", ws, "worker", "--task-queue", queue, "--cache", filepath.Join(root, "cache"), "--identity", "w1", "--log-level", "warn", "--agent-command", agent)
	until(t, "the worker polls", 60*time.Second, func() bool { return strings.Contains(wOut.String(), "polling task queue "+queue) })
	run, out := start("aot run", ws, "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec")
	if err, _ := waitFor(t, "aot run", run, out, 3*time.Minute); err != nil || !strings.Contains(out.String(), "completed (completed)") {
		t.Fatalf("aot run: %v\n%s", err, out)
	}
	_, rest, _ := strings.Cut(out.String(), "started workflow ")
	id, _, _ := strings.Cut(rest, " ")
	addr := envOf(run, "TEMPORAL_ADDRESS")

	cs, csOut := start("aot codec-server", ws, "codec-server", "--addr", "127.0.0.1:0")
	until(t, "the codec server listens", 30*time.Second, func() bool { return strings.Contains(csOut.String(), "decoding aot's payloads at http://") })
	_, rest, _ = strings.Cut(csOut.String(), "at http://")
	endpoint, _, _ := strings.Cut(rest, " ")
	endpoint = "http://" + endpoint
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Errorf("the codec server is not on the loopback address: %s", endpoint)
	}

	show := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(temporaltest.CLI(), append([]string{"workflow", "show", "--workflow-id", id, "--address", addr, "--namespace", "default", "-o", "json"}, args...)...)
		data, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("temporal workflow show %s: %v\n%s", strings.Join(args, " "), err, data)
		}
		return string(data)
	}
	// The workflow's input, as temporal workflow show -o json prints it.
	input := func(args ...string) (encoding string, in durable.LoopInput) {
		t.Helper()
		var h struct {
			Events []struct {
				Started *struct {
					Input struct {
						Payloads []struct {
							Metadata map[string][]byte `json:"metadata"`
							Data     []byte            `json:"data"`
						} `json:"payloads"`
					} `json:"input"`
				} `json:"workflowExecutionStartedEventAttributes"`
			} `json:"events"`
		}
		out := show(args...)
		if err := json.Unmarshal([]byte(out), &h); err != nil || len(h.Events) == 0 || h.Events[0].Started == nil || len(h.Events[0].Started.Input.Payloads) != 1 {
			t.Fatalf("temporal workflow show -o json %s: %v\n%.2000s", strings.Join(args, " "), err, out)
		}
		p := h.Events[0].Started.Input.Payloads[0]
		if string(p.Metadata["encoding"]) == "json/plain" {
			if err := json.Unmarshal(p.Data, &in); err != nil {
				t.Fatalf("the decoded input: %v", err)
			}
		}
		return string(p.Metadata["encoding"]), in
	}
	if enc, _ := input(); enc != "binary/zlib" {
		t.Errorf("without the codec the input is %s, want binary/zlib: the test would prove nothing", enc)
	}
	enc, in := input("--codec-endpoint", endpoint)
	if enc != "json/plain" || !strings.Contains(string(in.State), "files for the codec") || !strings.Contains(string(in.State), "paint the zebra-quartz fence") || in.Repo != remote {
		t.Errorf("temporal workflow show --codec-endpoint: %s, input %+v", enc, in)
	}
	decoded := show("--codec-endpoint", endpoint)
	for _, want := range []string{`"attempt/A/1"`, `"merge/A/1"`, `"verify/1"`, `"clean"`} {
		if !strings.Contains(decoded, want) {
			t.Errorf("no activity id %s in the history", want)
		}
	}

	// The browser's preflight, from the UI's origin and from another.
	for origin, want := range map[string]string{"http://localhost:8233": "http://localhost:8233", "http://evil.example": ""} {
		req, _ := http.NewRequest(http.MethodOptions, endpoint+"/decode", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != want || resp.StatusCode != http.StatusNoContent {
			t.Errorf("preflight from %s: %d, allowed origin %q, want %q", origin, resp.StatusCode, got, want)
		}
	}
	cs.Process.Signal(os.Interrupt)
	if err, _ := waitFor(t, "aot codec-server", cs, csOut, 15*time.Second); err != nil {
		t.Errorf("aot codec-server after Ctrl-C: %v\n%s", err, csOut)
	}

	// The memo names the loop.
	c, err := client.Dial(client.Options{HostPort: addr, DataConverter: durable.DataConverter(), Logger: temporaltest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := state.NewStore(sf).Read()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{durable.MemoRepository: remote, durable.MemoStateFile: ".claude/aot-loop-state.md", durable.MemoGoal: "files for the codec", durable.MemoLoopID: s.Control.LoopID}
	for k, v := range want {
		var got string
		p := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[k]
		if p == nil || durable.DataConverter().FromPayload(p, &got) != nil || got != v {
			t.Errorf("memo %s = %q, want %q", k, got, v)
		}
	}
}

// aot stop on a loop a worker serves: it returns once the workflow has
// closed, says so, and the state file says stopped.
func TestTemporalStopWaitsForTheWorkflowToClose(t *testing.T) {
	start := aotProcesses(t)
	root, _, ws, sf := temporalProject(t, "a loop to stop", "test -f A.txt", 1, state.Atom{ID: "A", Description: "write A.txt"})
	const queue = "stopped"
	ran := filepath.Join(root, "ran")
	agent := `touch ` + ran + `; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo '{"success": false, "summary": "held"}'`
	_, wOut := start("worker", ws, "worker", "--task-queue", queue, "--cache", filepath.Join(root, "cache"), "--identity", "w1", "--grace", "1s", "--agent-command", agent)
	until(t, "the worker polls", 60*time.Second, func() bool { return strings.Contains(wOut.String(), "polling task queue "+queue) })
	run, out := start("aot run", ws, "run", "--engine", "temporal", "--task-queue", queue, "--agent", "exec")
	until(t, "the agent runs", 60*time.Second, func() bool { _, err := os.Stat(ran); return err == nil })

	// The text of aot status shows the workflow, its workers, its
	// attempt on them, and a pause.
	pa, paOut := start("aot pause", ws, "pause")
	if err, _ := waitFor(t, "aot pause", pa, paOut, 40*time.Second); err != nil {
		t.Fatalf("aot pause: %v\n%s", err, paOut)
	}
	var stText string
	until(t, "aot status shows the pause", 30*time.Second, func() bool {
		st, stOut := start("aot status", ws, "status")
		if err, _ := waitFor(t, "aot status", st, stOut, 30*time.Second); err != nil {
			t.Fatalf("aot status: %v\n%s", err, stOut)
		}
		stText = stOut.String()
		return strings.Contains(stText, "Paused ")
	})
	for _, want := range []string{"engine on Temporal, workflow aot-", "(Running)", "Workers ", "w1 on task queue " + queue, "On workers ", "A attempt 1 (", "(aot resume goes on)"} {
		if !strings.Contains(stText, want) {
			t.Errorf("aot status does not say %q:\n%s", want, stText)
		}
	}

	sp, spOut := start("aot stop", ws, "stop", "--reason", "enough")
	err, took := waitFor(t, "aot stop", sp, spOut, 90*time.Second)
	if err != nil || !strings.Contains(spOut.String(), "the workflow has closed (manual_stop)") || took > 45*time.Second {
		t.Errorf("aot stop: %v after %s\n%s", err, took, spOut)
	}
	if s, err := state.NewStore(sf).Read(); err != nil || s.Control.Status != state.ControlStopped {
		t.Errorf("after aot stop the state file says %v %v", s.Control.Status, err)
	}
	if waitFor(t, "aot run", run, out, 30*time.Second); !strings.Contains(out.String(), "stopped (manual_stop): manual stop: enough") {
		t.Errorf("aot run did not end with the stop:\n%s", out)
	}
}
