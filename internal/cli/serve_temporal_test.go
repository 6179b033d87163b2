//go:build temporal && unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/aot-loop/aot/internal/durable"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/temporaltest"
)

// aot serve over a loop on a real Temporal dev server, with a real worker
// (aot worker) and git remote: nobody runs aot status, yet the API shows
// the workflow's progress, and its pause, resume, redirect and stop reach
// the workflow.

// inBackground runs aot args in this process until the test ends (or it
// returns), with its own streams.
func inBackground(t *testing.T, args ...string) (out, errOut *lockedBuffer, cancel func(), done <-chan int) {
	t.Helper()
	out, errOut = &lockedBuffer{}, &lockedBuffer{}
	d := &deps{io: newStreams(strings.NewReader(""), out, errOut, os.Getenv), getenv: os.Getenv, now: time.Now,
		self: os.Args[0], argv0: "aot", getwd: os.Getwd}
	ctx, cancelCtx := context.WithCancel(context.Background())
	ch := make(chan int, 1)
	go func() { ch <- run(ctx, d, args) }()
	var once sync.Once
	cancel = func() {
		once.Do(func() {
			cancelCtx()
			select {
			case <-ch:
			case <-time.After(30 * time.Second):
				t.Errorf("aot %s did not end within 30s of its cancel", args[0])
			}
		})
	}
	t.Cleanup(cancel)
	return out, errOut, cancel, ch
}

// apiOf calls aot serve's API at base with token; the answer must be JSON.
func apiOf(t *testing.T, base, token string) func(method, path string, body any) (int, map[string]any) {
	return func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			data, _ := json.Marshal(body)
			rd = bytes.NewReader(data)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		data, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: %d %q", method, path, resp.StatusCode, data)
		}
		return resp.StatusCode, out
	}
}

// gitIn runs git as a person would, with a hermetic configuration.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Person", "-c", "user.email=p@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// temporalProject is a project whose remote the workers reach: a bare
// repository, a clone of it (ws) holding the loop's state file (sf)
// committed and pushed, all in root.
func temporalProject(t *testing.T, goal, check string, parallel int, atoms ...state.Atom) (root, remote, ws, sf string) {
	t.Helper()
	root = t.TempDir()
	remote = filepath.Join(root, "remote.git")
	gitIn(t, root, "init", "-q", "--bare", remote)
	ws = filepath.Join(root, "work")
	gitIn(t, root, "clone", "-q", remote, ws)
	s := state.New(state.Objective{Goal: goal, BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c",
		BaseCase:    &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: check}},
		Constraints: state.Constraints{MaxIterations: 40, MaxParallelAgents: parallel, MaxStallCount: 5}}, atoms, goal)
	sf = filepath.Join(ws, ".claude", "aot-loop-state.md")
	if err := state.NewStore(sf).Create(s, false); err != nil {
		t.Fatal(err)
	}
	gitIn(t, ws, "add", "-A")
	gitIn(t, ws, "commit", "-q", "-m", "the loop")
	gitIn(t, ws, "push", "-q", "origin", "HEAD:refs/heads/main")
	return root, remote, ws, sf
}

// until polls cond every 100ms for at most within.
func until(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
	}
}

func TestServeShowsAndSteersALoopOnTemporal(t *testing.T) {
	addr := temporaltest.DevServer(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, "gitconfig"))
	t.Setenv("TEMPORAL_ADDRESS", addr)
	t.Setenv("TEMPORAL_NAMESPACE", "default")

	// A project whose remote the worker reaches: two atoms, A at once, B
	// held until the gate file exists (at most a minute).
	root, _, ws, sf := temporalProject(t, "two files", "test -f A.txt && test -f B.txt", 2,
		state.Atom{ID: "A", Description: "write A.txt"}, state.Atom{ID: "B", Description: "write B.txt"})
	gate := filepath.Join(root, "gate")
	agent := `if [ "$AOT_ATOM_ID" = B ]; then i=0; while [ ! -f ` + gate + ` ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; fi; ` +
		`echo "$AOT_ATOM_ID" > "$AOT_ATOM_ID.txt" && echo '{"success": true, "summary": "wrote '"$AOT_ATOM_ID"'"}'`

	const queue = "serve-e2e"
	wout, werr, _, wdone := inBackground(t, "worker", "--task-queue", queue, "--cache", filepath.Join(root, "cache"), "--identity", "w1", "--grace", "1s", "--agent-command", agent)
	until(t, "the worker polls", 30*time.Second, func() bool {
		select {
		case code := <-wdone:
			t.Fatalf("aot worker ended (%d): %s", code, werr)
		default:
		}
		return strings.Contains(wout.String(), "polling task queue "+queue)
	})

	// aot run --engine temporal starts the workflow; detached at once, it
	// leaves the state file behind the workflow.
	_, rerr, detach, rdone := inBackground(t, "run", "--engine", "temporal", "--task-queue", queue, "--state-file", sf,
		"--agent", "exec", "--agent-command", agent)
	var m durable.Marker
	until(t, "the workflow starts", 60*time.Second, func() bool {
		select {
		case code := <-rdone:
			t.Fatalf("aot run ended (%d): %s", code, rerr)
		default:
		}
		var ok bool
		m, ok = durable.ReadMarker(sf)
		return ok
	})
	detach()
	if st, err := state.NewStore(sf).Read(); err != nil || st.Control.Status != state.ControlPending {
		t.Fatalf("after the detach the local file should be behind: %v %+v", err, st.Control)
	}
	c, err := durable.Dial(context.Background()) // TEMPORAL_ADDRESS, the loop's data converter
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	workflow := func() durable.Status {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := durable.Query(ctx, c, m)
		if err != nil {
			t.Fatalf("query the workflow: %v", err)
		}
		return st
	}

	// aot serve, in this process, as aot-temporal's (the tagged build).
	sout, serr, _, sdone := inBackground(t, "serve", "--addr", "127.0.0.1:0", "--workspace", ws, "--token-file", filepath.Join(root, "token"), "--json")
	var started struct{ URL string }
	until(t, "aot serve prints its URL", 30*time.Second, func() bool {
		select {
		case code := <-sdone:
			t.Fatalf("aot serve ended (%d): %s", code, serr)
		default:
		}
		return json.Unmarshal([]byte(sout.String()), &started) == nil && started.URL != ""
	})
	u, err := url.Parse(started.URL)
	if err != nil {
		t.Fatal(err)
	}
	base, token := "http://"+u.Host, u.Query().Get("token")
	api := apiOf(t, base, token)
	_, list := api("GET", "/api/loops", nil)
	loops, _ := list["loops"].([]any)
	if len(loops) != 1 {
		t.Fatalf("loops: %v", list)
	}
	id := loops[0].(map[string]any)["loop_id"].(string)
	type summary struct {
		Status string
		Engine struct {
			Running, Paused bool
			PausedSince     *time.Time `json:"paused_since"`
			Temporal        *struct {
				WorkflowID string `json:"workflow_id"`
			}
		}
		Progress struct{ Resolved int }
		Running  []struct{ Atom string }
	}
	loop := func() summary {
		t.Helper()
		code, doc := api("GET", "/api/loops/"+id, nil)
		data, _ := json.Marshal(doc)
		var s summary
		if code != 200 || json.Unmarshal(data, &s) != nil {
			t.Fatalf("GET the loop: %d %s", code, data)
		}
		return s
	}
	describe := func(s summary) string { return fmt.Sprintf("%+v", s) }

	// The workflow's progress shows through the API: A resolved on the
	// worker and merged, B running there.
	var last summary
	until(t, "the API shows A resolved and B running", 2*time.Minute, func() bool {
		last = loop()
		return last.Status == "running" && last.Engine.Running && last.Engine.Temporal != nil &&
			last.Progress.Resolved == 1 && len(last.Running) == 1 && last.Running[0].Atom == "B"
	})
	if last.Engine.Temporal.WorkflowID != m.WorkflowID {
		t.Errorf("workflow %q, want %q", last.Engine.Temporal.WorkflowID, m.WorkflowID)
	}
	if st, err := state.NewStore(sf).Read(); err != nil || st.Atom("A").Status != state.StatusResolved {
		t.Errorf("the state file is not in step with the workflow: %v", err)
	}

	// Pause and resume reach the workflow.
	if code, out := api("POST", "/api/loops/"+id+"/pause", map[string]any{"reason": "a look"}); code != 200 || out["paused"] != true {
		t.Fatalf("pause: %d %v", code, out)
	}
	if !workflow().Paused {
		t.Error("the workflow is not paused")
	}
	if s := loop(); s.Status != "paused" || !s.Engine.Paused || s.Engine.PausedSince == nil || time.Since(*s.Engine.PausedSince) > time.Minute {
		t.Errorf("after the pause: %s", describe(s))
	}
	if p := workflow().Pause; p == nil || p.Reason != "a look" {
		t.Errorf("the workflow's pause: %+v", p)
	}
	if code, out := api("POST", "/api/loops/"+id+"/resume", map[string]any{}); code != 200 || out["paused"] != false {
		t.Fatalf("resume: %d %v", code, out)
	}
	if workflow().Paused {
		t.Error("the workflow is still paused")
	}
	// A change the workflow refuses is refused as the local engine refuses.
	if code, out := api("POST", "/api/loops/"+id+"/redirect", map[string]any{"reason": "r", "remove_atoms": []string{"NOPE"}}); code != 422 {
		t.Errorf("a redirect the workflow refuses: %d %v", code, out)
	}
	if code, out := api("POST", "/api/loops/"+id+"/redirect", map[string]any{"reason": "fewer rounds", "max_iterations": 30}); code != 200 || out["applied_by"] != "engine" {
		t.Errorf("redirect: %d %v", code, out)
	}
	if st := workflow(); !strings.Contains(string(st.State), "max_iterations: 30") {
		t.Errorf("the workflow did not take the redirect:\n%s", st.State)
	}

	// Stop cancels the workflow: it ends as a manual stop, B's agent killed.
	if code, out := api("POST", "/api/loops/"+id+"/stop", map[string]any{"reason": "enough"}); code != 200 || out["status"] != "stopped" {
		t.Fatalf("stop: %d %v", code, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(ctx, m.WorkflowID, "")
	if err != nil || d.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("the workflow after the stop: %v %v", d.GetWorkflowExecutionInfo().GetStatus(), err)
	}
	if st := workflow(); !st.Done || st.Outcome == nil || st.Outcome.Reason != string(engine.ManualStop) {
		t.Errorf("the workflow's outcome: %+v", st.Outcome)
	}
	if s := loop(); s.Status != "user_exit" || s.Engine.Running {
		t.Errorf("after the stop: %s", describe(s))
	}
}
