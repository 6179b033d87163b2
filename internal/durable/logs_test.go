package durable

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
	"github.com/aot-loop/aot/internal/engine"
	loghist "github.com/aot-loop/aot/internal/history"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

func TestAgentLogTravelsAsWhatTheActivityAddedItsEndWhenLarge(t *testing.T) {
	dir := t.TempDir()
	name := loghist.LogName("A", "worker", 1)
	path := filepath.Join(dir, name)
	appendTo := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	// No log yet, and nothing written: nothing travels.
	m := markLog(dir, name)
	if lg := m.since("w1"); lg != nil {
		t.Fatalf("a log that does not exist travels as %+v", lg)
	}
	// A small log travels whole.
	appendTo("earlier try\n")
	m = markLog(dir, name)
	appendTo("first line\nsecond line\n")
	if lg := m.since("w1"); lg == nil || lg.Name != name || lg.Text != "first line\nsecond line\n" {
		t.Fatalf("a small log after an earlier try's: %+v", lg)
	}
	// A large one travels as its end, from a line's start, after a line
	// that says how much was cut and where the whole log is.
	m = markLog(dir, name)
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "line %05d of the agent's output, long enough to add up\n", i)
	}
	appendTo(b.String())
	lg := m.since("w1")
	if lg == nil {
		t.Fatal("a large log does not travel")
	}
	head, body, _ := strings.Cut(lg.Text, "\n")
	got := regexp.MustCompile(`^\[aot: the first (\d+) bytes of what the agent printed here are cut; the last (\d+) follow; the whole log is (.+) on worker w1\]$`).FindStringSubmatch(head)
	if got == nil {
		t.Fatalf("the first line of a cut log: %q", head)
	}
	cut, _ := strconv.Atoi(got[1])
	kept, _ := strconv.Atoi(got[2])
	if cut+kept != b.Len() || kept != len(body) || kept > MaxAgentLog || kept < MaxAgentLog-100 || got[3] != path {
		t.Errorf("cut %d + kept %d of %d bytes (body %d), path %s", cut, kept, b.Len(), len(body), got[3])
	}
	if !strings.HasPrefix(body, "line ") || !strings.HasSuffix(body, "line 04999 of the agent's output, long enough to add up\n") || body != b.String()[cut:] {
		t.Errorf("the kept end does not start at a line or is not the log's end: %.80q ... %.80q", body, body[max(0, len(body)-80):])
	}
	// A log replaced by a shorter one is read from its start.
	if err := os.WriteFile(path, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if lg := m.since("w1"); lg == nil || lg.Text != "new\n" {
		t.Errorf("a replaced log: %+v", lg)
	}
}

func TestProjectAppendsEachAgentLogOnce(t *testing.T) {
	sf, s := fourAtomsFile(t)
	logA := filepath.Join(loghist.LogDir(sf), "A-worker-1.log")
	read := func() string {
		data, _ := os.ReadFile(logA)
		return string(data)
	}
	st := Status{State: state.Marshal(s), LogSeq: 2, Logs: []AgentLog{{Seq: 1, Name: "A-worker-1.log", Text: "one\n"}, {Seq: 2, Name: "A-worker-1.log", Text: "two\n"}}}
	for range 2 {
		if err := Project(sf, st); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != "one\ntwo\n" {
			t.Fatalf("the log after projecting the same status again: %q", got)
		}
	}
	// The next query brings the log after the last one appended.
	m := Marker{WorkflowID: "w", stateFile: sf}
	if m.logsSeen() != 2 {
		t.Errorf("logs seen: %d", m.logsSeen())
	}
	st.LogSeq, st.Logs = 3, []AgentLog{{Seq: 3, Name: "A-worker-1.log", Text: "three\n"}}
	if err := Project(sf, st); err != nil || read() != "one\ntwo\nthree\n" {
		t.Fatalf("the next log: %v %q", err, read())
	}
	// A name that is a path (no worker of aot's gives one) is made a
	// file's name in the logs folder.
	bad := Status{State: st.State, LogSeq: 4, Logs: []AgentLog{{Seq: 4, Name: "../../escape", Text: "x\n"}}}
	if err := Project(sf, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(sf), "escape")); err == nil {
		t.Error("a log named as a path was written outside the logs folder")
	}
	if data, err := os.ReadFile(filepath.Join(loghist.LogDir(sf), "_.._.._escape.log")); err != nil || string(data) != "x\n" || m.logsSeen() != 4 {
		t.Errorf("a log named as a path: %v %q (seen %d)", err, data, m.logsSeen())
	}
	// A new workflow numbers its logs afresh.
	fresh := Status{State: st.State, LogSeq: 1, Logs: []AgentLog{{Seq: 1, Name: "B-worker-1.log", Text: "b\n"}}}
	if err := Project(sf, fresh); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(loghist.LogDir(sf), "B-worker-1.log")); err != nil || string(data) != "b\n" {
		t.Errorf("a new workflow's first log: %v %q", err, data)
	}
}

func TestWorkflowKeepsTheAgentsLastLogsAcrossContinueAsNew(t *testing.T) {
	const size = 60 << 10
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		r := success(in)
		name := loghist.LogName(in.Task.Atom.ID, string(in.Task.Role), in.Task.Attempt)
		r.Log = &AgentLog{Name: name, Text: in.Task.Atom.ID + strings.Repeat(".", size-len(in.Task.Atom.ID))}
		return r, nil
	}
	var atoms []state.Atom
	for i := range 14 {
		atoms = append(atoms, atom(fmt.Sprintf("A%02d", i)))
	}
	in := input(loopState(state.Constraints{MaxParallelAgents: 1}, atoms, nil))
	in.ContinueAfter = 6
	out, r, continued := runToEnd(t, w, in)
	wantReason(t, out, engine.Completed)
	if len(continued) < 2 {
		t.Fatalf("%d continuations, want 2 or more", len(continued))
	}
	// Each log is numbered once, in order; the newest are kept, within
	// the bounds, and handed to the next run.
	ring := func(what string, logs []AgentLog, last int) {
		t.Helper()
		total := 0
		for i, lg := range logs {
			total += len(lg.Text)
			if lg.Seq != last-len(logs)+1+i || len(lg.Text) != size {
				t.Errorf("%s: log %d is %d (%d bytes), want %d", what, i, lg.Seq, len(lg.Text), last-len(logs)+1+i)
			}
		}
		if total > logRingBytes || len(logs) != min(last, logRingBytes/size) {
			t.Errorf("%s: %d logs of %d bytes in all", what, len(logs), total)
		}
	}
	for i, next := range continued {
		ring(fmt.Sprintf("carry %d", i), next.Carry.Logs, next.Carry.LogSeq)
	}
	st := queryStatus(t, r, 0, 0)
	if st.LogSeq != len(atoms) {
		t.Errorf("log_seq %d after %d attempts", st.LogSeq, len(atoms))
	}
	ring("the status", st.Logs, st.LogSeq)
	if last := queryStatus(t, r, 0, st.LogSeq-1); len(last.Logs) != 1 || last.Logs[0].Seq != st.LogSeq {
		t.Errorf("the logs after %d: %+v", st.LogSeq-1, last.Logs)
	}
}

// loggingExecAgents builds the exec agent with its logs in the attempt's
// logs folder, as aot worker does.
func loggingExecAgents(ch AgentChoice, role agent.Role, dirs AgentDirs) (agent.Agent, error) {
	logs := func(t agent.Task) (io.WriteCloser, error) {
		if err := os.MkdirAll(dirs.Logs, 0o700); err != nil {
			return nil, err
		}
		return os.OpenFile(filepath.Join(dirs.Logs, loghist.LogName(t.Atom.ID, string(t.Role), t.Attempt)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	}
	return backend.New(backend.Config{Spec: backend.Spec{Agent: "exec", Command: ch.Command}}, backend.Env{Log: logs})
}

func TestAttemptsAndJudgesReturnWhatTheirAgentsPrinted(t *testing.T) {
	repo, seed := newRemote(t, map[string]string{})
	a := newActivities(t)
	a.NewAgent = loggingExecAgents
	in := attemptInput(repo, seed, "A", `echo "the worker of A was here" >&2; echo a > a.txt && echo '{"success": true}'`)
	res, err := a.Attempt(context.Background(), in)
	if err != nil || res.Commit == "" {
		t.Fatalf("attempt: %+v, %v", res, err)
	}
	if res.Log == nil || res.Log.Name != "A-worker-1.log" || !strings.Contains(res.Log.Text, "the worker of A was here") {
		t.Fatalf("the attempt's log: %+v", res.Log)
	}
	// The same attempt again on this worker (Temporal's retry) brings
	// only what it printed itself.
	in.Agent.Command = `echo "again" >&2; echo '{"success": true}'`
	again, err := a.Attempt(context.Background(), in)
	if err != nil || again.Log == nil || strings.Contains(again.Log.Text, "the worker of A was here") || !strings.Contains(again.Log.Text, "again") {
		t.Fatalf("the retried attempt's log: %+v, %v", again.Log, err)
	}

	judged := []byte(strings.Replace(verifyState, "%s", `      - item: "reads well"
        check:
          type: assertion
          value: "a.txt reads well"`, 1))
	judge := AgentChoice{Agent: "exec", Command: `echo "the judge read it" >&2; echo '{"passed": true, "evidence": "it does"}'`}
	r, err := a.Verify(context.Background(), VerifyInput{Repo: repo, Commit: branchOf(t, repo, in.Branch), State: judged, Judge: true, Agent: judge, Loop: "loop-1"})
	if err != nil || !r.Report.Passed {
		t.Fatalf("verify: %+v, %v", r.Report, err)
	}
	if got := r.Logs["base_case-judge-1.log"]; len(r.Logs) != 1 || !strings.Contains(got, "the judge read it") {
		t.Errorf("the judges' logs: %q", r.Logs)
	}
	// Without a judge, no log.
	plain := []byte(strings.Replace(verifyState, "%s\n", "", 1))
	if r, err := a.Verify(context.Background(), VerifyInput{Repo: repo, Commit: branchOf(t, repo, in.Branch), State: plain, Loop: "loop-1"}); err != nil || len(r.Logs) != 0 {
		t.Errorf("a verification without a judge: %q, %v", r.Logs, err)
	}
}

func TestWorkflowKeepsTheJudgesLogs(t *testing.T) {
	w := newWorld()
	w.answer = func(in AttemptInput) (AttemptResult, error) {
		r := success(in)
		r.Log = &AgentLog{Name: "A-worker-1.log", Text: "worked\n"}
		return r, nil
	}
	r := newRun(t, w)
	r.env.OnActivity(VerifyActivity, mock.Anything, mock.Anything).Return(VerifyResult{Report: verify.Report{Passed: true},
		Logs: map[string]string{"base_case-judge-1.log": "judged\n"}}, nil)
	wantReason(t, r.execute(t, input(loopState(state.Constraints{}, []state.Atom{atom("A")}, nil))), engine.Completed)
	st := queryStatus(t, r, 0, 0)
	want := []AgentLog{{Seq: 1, Name: "A-worker-1.log", Text: "worked\n"}, {Seq: 2, Name: "base_case-judge-1.log", Text: "judged\n"}}
	if st.LogSeq != 2 || fmt.Sprint(st.Logs) != fmt.Sprint(want) {
		t.Errorf("logs %+v (seq %d), want %+v", st.Logs, st.LogSeq, want)
	}
}

// fourAtomsFile writes the four-atom loop's state file.
func fourAtomsFile(t *testing.T) (string, *state.State) {
	t.Helper()
	sf := filepath.Join(t.TempDir(), ".claude", "aot-loop-state.md")
	s, err := state.Parse(fourAtoms())
	if err != nil {
		t.Fatal(err)
	}
	if err := state.NewStore(sf).Create(s, false); err != nil {
		t.Fatal(err)
	}
	return sf, s
}

// queryStatus asks the test workflow for its status after since events
// and logsSince logs.
func queryStatus(t *testing.T, r *run, since, logsSince int) Status {
	t.Helper()
	v, err := r.env.QueryWorkflow(QueryStatus, since, logsSince)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}
