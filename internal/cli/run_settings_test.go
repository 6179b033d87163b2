//go:build temporal

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/aot-loop/aot/internal/durable"
	"github.com/aot-loop/aot/internal/engine"
)

// What an aot run flag is to the two engines.
const (
	flagSetting  = "setting"  // a run setting (engine.Settings): handed whole to either engine
	flagAgents   = "agents"   // the agents: built here for a local run, named to the workers on Temporal
	flagOutput   = "output"   // how aot run reports, the same with either engine
	flagLocal    = "local"    // a local run's only: refused with --engine temporal
	flagTemporal = "temporal" // a workflow's only: refused without --engine temporal
	flagEngine   = "engine"   // the choice of engine itself
)

type runFlag struct {
	class string
	args  []string // the flag with a value other than its default
	// set is what the flag does to the run's settings (flagSetting, and
	// flagLocal flags that are settings of a local run).
	set func(*engine.Settings)
}

// runFlags classifies every aot run flag. A new flag fails
// TestEveryRunFlagReachesBothEngines until it is classified here.
var runFlags = map[string]runFlag{
	"max-parallel":   {flagSetting, []string{"--max-parallel", "3"}, func(s *engine.Settings) { s.MaxParallel = 3 }},
	"max-iterations": {flagSetting, []string{"--max-iterations", "7"}, func(s *engine.Settings) { s.MaxIterations = 7 }},
	"agent-timeout":  {flagSetting, []string{"--agent-timeout", "90s"}, func(s *engine.Settings) { s.AgentTimeout = 90 * time.Second }},
	"check-timeout":  {flagSetting, []string{"--check-timeout", "5s"}, func(s *engine.Settings) { s.CheckTimeout = 5 * time.Second }},
	"no-wait":        {flagSetting, []string{"--no-wait"}, func(s *engine.Settings) { s.NoWait = true }},
	"isolation":      {flagSetting, []string{"--isolation", "worktree"}, func(s *engine.Settings) { s.Isolation = engine.IsolationWorktree }},
	"keep-failed":    {flagLocal, []string{"--keep-failed"}, func(s *engine.Settings) { s.KeepFailed = true }},
	"worktree-dir":   {flagLocal, []string{"--worktree-dir", "/tmp/aot-wt"}, nil},
	"confine":        {flagLocal, []string{"--confine", "off"}, nil},
	"detach":         {flagLocal, []string{"--detach"}, nil},
	"agent":          {flagAgents, []string{"--agent", "codex"}, nil},
	"model":          {flagAgents, []string{"--model", "o3"}, nil},
	"role":           {flagAgents, []string{"--role", "judge=gemini"}, nil},
	"agent-command":  {flagAgents, []string{"--agent-command", "echo other"}, nil},
	"quiet":          {flagOutput, []string{"--quiet"}, nil},
	"verbose":        {flagOutput, []string{"--verbose"}, nil},
	"task-queue":     {flagTemporal, []string{"--task-queue", "q7"}, nil},
	"remote":         {flagTemporal, []string{"--remote", "upstream"}, nil},
	"attach":         {flagTemporal, []string{"--attach", "aot-wf"}, nil},
	"engine":         {flagEngine, nil, nil},
}

// received is what one engine would run with after aot run parsed args.
type received struct {
	opts     *runOptions
	settings engine.Settings
	agents   string // the agents as that engine gets them
	err      error
}

// parseRun parses an aot run command line as aot does, and returns what
// the chosen engine would receive: local.Options for a local run, the
// workflow input (through its JSON, as Temporal carries it) on Temporal.
func parseRun(t *testing.T, args ...string) received {
	t.Helper()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	d := &deps{io: newStreams(strings.NewReader(""), &out, &errOut, func(string) string { return "" }),
		getenv: func(string) string { return "" }, self: "aot"}
	g := &globalOptions{StateFile: filepath.Join(dir, ".claude", "aot-loop-state.md")}
	var got received
	cmd := newCmdRun(d, g, func(o *runOptions) error {
		got.opts = o
		if o.Engine == engineTemporal {
			in := temporalStartOptions(o).Input(durable.LoopInput{})
			data, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			var back durable.LoopInput
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			roles, _ := json.Marshal(back.Agent)
			got.settings, got.agents = back.Settings, string(roles)
			return nil
		}
		eo := localOptions(o)
		roles, _ := json.Marshal(eo.Agents)
		got.settings, got.agents = eo.Settings, string(roles)
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	got.err = cmd.Execute()
	return got
}

func TestEveryRunFlagReachesBothEngines(t *testing.T) {
	var names []string
	newCmdRun(&deps{io: newStreams(nil, nil, nil, func(string) string { return "" })}, &globalOptions{}, nil).Flags().VisitAll(func(f *pflag.Flag) {
		names = append(names, f.Name)
	})
	for _, n := range names {
		if _, ok := runFlags[n]; !ok {
			t.Errorf("aot run --%s is not classified in runFlags: say whether it is a setting both engines receive, or refused on one", n)
		}
	}
	for n := range runFlags {
		if !slices.Contains(names, n) {
			t.Errorf("runFlags classifies --%s, which aot run no longer has", n)
		}
	}
	base := []string{"--agent-command", "echo {}"}
	engines := map[string][]string{"local": {"--engine", "local"}, "temporal": {"--engine", "temporal"}}
	plain := map[string]received{}
	for name, e := range engines {
		r := parseRun(t, append(slices.Clone(e), base...)...)
		if r.err != nil {
			t.Fatalf("aot run %s without flags: %v", name, r.err)
		}
		plain[name] = r
	}
	if plain["local"].settings != plain["temporal"].settings {
		t.Fatalf("without flags the engines receive different settings:\nlocal    %+v\ntemporal %+v", plain["local"].settings, plain["temporal"].settings)
	}

	for _, n := range names {
		f, ok := runFlags[n]
		if !ok || f.class == flagEngine {
			continue
		}
		t.Run(n, func(t *testing.T) {
			got := map[string]received{}
			for name, e := range engines {
				args := append(append(slices.Clone(e), base...), f.args...)
				got[name] = parseRun(t, args...)
			}
			refused := func(engine string) {
				t.Helper()
				var ue *usageError
				if err := got[engine].err; !errors.As(err, &ue) || !strings.Contains(err.Error(), "--"+n) {
					t.Errorf("%s: want a usage error naming --%s, got %v", engine, n, err)
				}
			}
			accepted := func(engine string) {
				t.Helper()
				if err := got[engine].err; err != nil {
					t.Fatalf("%s: %v", engine, err)
				}
			}
			switch f.class {
			case flagSetting:
				accepted("local")
				accepted("temporal")
				want := plain["local"].settings
				f.set(&want)
				for name := range engines {
					if got[name].settings != want {
						t.Errorf("%s received %+v, want %+v", name, got[name].settings, want)
					}
				}
			case flagLocal:
				accepted("local")
				refused("temporal")
				if f.set != nil {
					want := plain["local"].settings
					f.set(&want)
					if got["local"].settings != want {
						t.Errorf("local received %+v, want %+v", got["local"].settings, want)
					}
				}
			case flagTemporal:
				refused("local")
				if n == "attach" { // a reattach: its workflow has its settings
					accepted("temporal")
					if got["temporal"].opts.Attach != "aot-wf" || temporalStartOptions(got["temporal"].opts).Attach != "aot-wf" {
						t.Errorf("--attach did not reach the start: %+v", temporalStartOptions(got["temporal"].opts))
					}
					return
				}
				accepted("temporal")
				so := temporalStartOptions(got["temporal"].opts)
				if v := map[string]string{"task-queue": so.TaskQueue, "remote": so.Remote}[n]; v != f.args[1] {
					t.Errorf("--%s did not reach the start: %+v", n, so)
				}
			case flagAgents:
				for name := range engines {
					accepted(name)
					if got[name].agents == plain[name].agents {
						t.Errorf("%s: the agents it receives do not change with --%s: %s", name, n, got[name].agents)
					}
				}
			case flagOutput:
				for name := range engines {
					accepted(name)
					o, p := got[name].opts, plain[name].opts
					if o.Quiet == p.Quiet && o.Verbose == p.Verbose {
						t.Errorf("%s: --%s changed nothing aot run reports with", name, n)
					}
				}
			default:
				t.Fatalf("unknown class %q", f.class)
			}
		})
	}
}

// A workflow input recorded before the settings had a type of their own
// still reads: its bounds are where they were.
func TestRecordedLoopInputReadsIntoSettings(t *testing.T) {
	var in durable.LoopInput
	if err := json.Unmarshal([]byte(`{"state":null,"repo":"r","base":"b","base_commit":"c","agent":{"agent":"exec"},"max_parallel":2,"max_iterations":9,"agent_timeout":120000000000,"carry":{}}`), &in); err != nil {
		t.Fatal(err)
	}
	want := engine.Settings{MaxParallel: 2, MaxIterations: 9, AgentTimeout: 2 * time.Minute}
	if in.Settings != want {
		t.Errorf("settings %+v, want %+v", in.Settings, want)
	}
}
