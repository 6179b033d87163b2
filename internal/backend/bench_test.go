package backend

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/prompt"
)

// cannedStreams are what each CLI prints for one worker attempt that runs
// one shell command and answers success (shapes as the real CLIs print
// them; see the backends' tests against the real CLIs).
var cannedStreams = map[string]string{
	"claude": `{"type":"system","subtype":"init","cwd":"/w","session_id":"s1","tools":["Bash","Read"],"model":"m","permissionMode":"acceptEdits"}
{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"go test ./...","description":"test"}}],"usage":{"input_tokens":100,"output_tokens":20}},"session_id":"s1"}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":false}]},"session_id":"s1"}
{"type":"result","subtype":"success","is_error":false,"duration_ms":900,"num_turns":2,"result":"","structured_output":{"success":true,"summary":"tests pass","artifacts":["a.go"]},"session_id":"s1","total_cost_usd":0.0123,"usage":{"input_tokens":200,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40},"permission_denials":[],"terminal_reason":"completed"}
`,
	"codex": `{"type":"thread.started","thread_id":"th1"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'go test ./...'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'go test ./...'","aggregated_output":"ok\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"{\"success\":true,\"summary\":\"tests pass\",\"artifacts\":[\"a.go\"]}"}}
{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":0,"output_tokens":40}}
`,
	"gemini": `{"type":"init","timestamp":"t","session_id":"s1","model":"m"}
{"type":"tool_use","timestamp":"t","tool_name":"run_shell_command","tool_id":"c1","parameters":{"command":"go test ./..."}}
{"type":"tool_result","timestamp":"t","tool_id":"c1","status":"success","output":"ok"}
{"type":"message","timestamp":"t","role":"assistant","content":"{\"success\":true,\"summary\":\"tests pass\",\"artifacts\":[\"a.go\"]}","delta":true}
{"type":"result","timestamp":"t","status":"success","stats":{"total_tokens":240,"input_tokens":200,"output_tokens":40,"models":{}}}
`,
}

// fakeCLI writes a stand-in for a CLI that reads its prompt and prints
// stream, as fast as a process can.
func fakeCLI(tb testing.TB, stream string) string {
	dir := tb.TempDir()
	out := filepath.Join(dir, "stream.jsonl")
	if err := os.WriteFile(out, []byte(stream), 0o644); err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(dir, "cli")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ncat >/dev/null\nexec cat "+out+"\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	return bin
}

func benchTask(dir string) agent.Task {
	return agent.Task{Role: agent.Worker, Workdir: dir, Attempt: 1,
		Atom:      agent.AtomRef{ID: "A3", Description: "make the tests pass", DependsOn: []string{"A1"}},
		Objective: agent.Objective{Goal: "a working parser", DefinitionOfDone: "go test ./... passes"},
		Bindings:  map[string]agent.Binding{"A1": {Summary: "grammar written", Artifacts: []string{"grammar.y"}}}}
}

// The canned streams are read as the real CLIs' are: the benchmark below
// measures real work, not an early failure.
func TestCannedStreamsAnswerSuccess(t *testing.T) {
	for name, stream := range cannedStreams {
		a, err := factories[name](Spec{Agent: name, Bin: fakeCLI(t, stream)}, Env{Prompts: prompt.Renderer{}, Getenv: os.Getenv})
		if err != nil {
			t.Fatal(err)
		}
		var acts []agent.Activity
		ctx := agent.WithActivity(context.Background(), func(x agent.Activity) { acts = append(acts, x) })
		r, err := a.Run(ctx, benchTask(t.TempDir()))
		if err != nil || !r.Success || r.Summary != "tests pass" || !r.Usage.Known || r.Usage.OutputTokens != 40 {
			t.Errorf("%s: %+v %v", name, r, err)
		}
		if len(acts) != 1 || !strings.Contains(acts[0].Detail, "go test ./...") {
			t.Errorf("%s: activity %+v", name, acts)
		}
	}
}

// BenchmarkAttemptOverhead is what aot adds to one attempt of each CLI
// backend: rendering the prompt, the command line, the process tree's
// bookkeeping, reading the stream and classifying the outcome. The CLI is
// a stand-in that prints a real attempt's stream at once; the baseline is
// the same stand-in started bare (os/exec, prompt on stdin, output read).
// Reported: the backend's time per attempt (ns/op), the bare start's
// (bare-ns) and their difference (overhead-ms).
func BenchmarkAttemptOverhead(b *testing.B) {
	for _, name := range []string{"claude", "codex", "gemini"} {
		b.Run(name, func(b *testing.B) {
			bin := fakeCLI(b, cannedStreams[name])
			a, err := factories[name](Spec{Agent: name, Bin: bin}, Env{Prompts: prompt.Renderer{}, Getenv: os.Getenv})
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			t := benchTask(dir)
			p, _ := prompt.Renderer{}.Render(t)
			var bare, full time.Duration
			for b.Loop() {
				start := time.Now()
				cmd := exec.Command(bin)
				cmd.Dir = dir
				cmd.Stdin = strings.NewReader(p)
				if _, err := cmd.Output(); err != nil {
					b.Fatal(err)
				}
				bare += time.Since(start)
				start = time.Now()
				if r, err := a.Run(context.Background(), t); err != nil || !r.Success {
					b.Fatalf("%+v %v", r, err)
				}
				full += time.Since(start)
			}
			n := float64(b.N)
			b.ReportMetric(float64(full.Nanoseconds())/n, "ns/op")
			b.ReportMetric(float64(bare.Nanoseconds())/n, "bare-ns")
			b.ReportMetric(float64((full-bare).Nanoseconds())/n/1e6, "overhead-ms")
		})
	}
}
