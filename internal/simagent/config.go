package simagent

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Config is every knob of the sim. A profile is a preset of them; a flag
// given explicitly wins over the preset.
type Config struct {
	Profile string
	Seed    uint64

	P       float64 // an attempt at a deliverable succeeds with this probability
	Lie     float64 // a failed worker attempt claims success with this probability
	Crash   float64 // a call prints half an answer and SIGKILLs itself
	Hang    float64 // a call sleeps for HangFor (until the runner kills it)
	Regress float64 // a successful attempt breaks another done deliverable

	Duration   time.Duration // mean duration of one simulated model call (jittered 0.5x to 1.5x)
	SlowFactor float64       // slow deliverables (spec) take this many times longer
	HangFor    time.Duration // how long a hanging call sleeps

	TokensIn, TokensOut int64   // per simulated model call
	USDPerMTokIn        float64 // price of a million input tokens
	USDPerMTokOut       float64 // price of a million output tokens

	Background float64 // a call starts `sleep 1000 &` (a dev server it forgets)
	Planner    string  // "empty" answers {"atoms": []}; "fix" proposes one fix atom per broken deliverable

	SpecPath  string
	CallsLog  string // one line per call (env AOT_SIM_CALLS)
	PidsFile  string // one line per process started (env AOT_SIM_PIDS)
	Ledger    string // one line per simulated model call (env AOT_SIM_LEDGER)
	UsageFile string // env AOT_USAGE_FILE, set by the runner: one line per model call
}

// Profiles are the presets, by name.
var Profiles = map[string]func(*Config){
	"honest": func(c *Config) {},
	"liar":   func(c *Config) { c.Lie = 1 },
	"flaky":  func(c *Config) { c.Crash, c.Hang = 0.2, 0.1 },
	"regressing": func(c *Config) {
		c.Regress = 0.3
	},
	"mixed": func(c *Config) { c.SlowFactor = 10 },
}

// ProfileNames lists the presets in a stable order.
func ProfileNames() []string {
	return []string{"honest", "liar", "flaky", "regressing", "mixed"}
}

// Defaults is the honest profile with the default knobs.
func Defaults() Config {
	return Config{
		Profile: "honest", Seed: 1, P: 0.7,
		Duration: 20 * time.Millisecond, SlowFactor: 1, HangFor: time.Hour,
		TokensIn: 3000, TokensOut: 600, USDPerMTokIn: 3, USDPerMTokOut: 15,
		Planner: "empty",
	}
}

// ParseFlags reads the sim's flags; getenv supplies the log paths a flag
// does not give (AOT_SIM_CALLS, AOT_SIM_PIDS, AOT_SIM_LEDGER) and
// AOT_USAGE_FILE.
func ParseFlags(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	c := Defaults()
	fs := flag.NewFlagSet("simagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Profile, "profile", c.Profile, "preset: "+strings.Join(ProfileNames(), ", "))
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "PRNG seed")
	fs.Float64Var(&c.P, "p", c.P, "probability that an attempt at a deliverable succeeds")
	fs.Float64Var(&c.Lie, "lie", c.Lie, "probability that a failed worker attempt claims success (liar: 1)")
	fs.Float64Var(&c.Crash, "crash", c.Crash, "probability that a call crashes: half an answer, then SIGKILL (flaky: 0.2)")
	fs.Float64Var(&c.Hang, "hang", c.Hang, "probability that a call hangs until killed (flaky: 0.1)")
	fs.Float64Var(&c.Regress, "regress", c.Regress, "probability that a success breaks another done deliverable (regressing: 0.3)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "mean duration of a simulated model call")
	fs.Float64Var(&c.SlowFactor, "slow-factor", c.SlowFactor, "slow deliverables take this many times longer (mixed: 10)")
	fs.DurationVar(&c.HangFor, "hang-for", c.HangFor, "how long a hanging call sleeps")
	fs.Int64Var(&c.TokensIn, "tokens-in", c.TokensIn, "input tokens per simulated model call")
	fs.Int64Var(&c.TokensOut, "tokens-out", c.TokensOut, "output tokens per simulated model call")
	fs.Float64Var(&c.USDPerMTokIn, "usd-per-mtok-in", c.USDPerMTokIn, "USD per million input tokens")
	fs.Float64Var(&c.USDPerMTokOut, "usd-per-mtok-out", c.USDPerMTokOut, "USD per million output tokens")
	fs.Float64Var(&c.Background, "background", c.Background, "probability that a call starts `sleep 1000 &` and leaves it")
	fs.StringVar(&c.Planner, "planner", c.Planner, `planner answers: "empty" ({"atoms": []}) or "fix" (an atom per broken deliverable)`)
	fs.StringVar(&c.SpecPath, "spec", "", "the project's spec file (JSON; required)")
	fs.StringVar(&c.CallsLog, "calls", "", "calls log: one line per call (default $AOT_SIM_CALLS)")
	fs.StringVar(&c.PidsFile, "pids", "", "pids file: one line per process started (default $AOT_SIM_PIDS)")
	fs.StringVar(&c.Ledger, "ledger", "", "model-call ledger: one line per simulated model call (default $AOT_SIM_LEDGER)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("simagent: unexpected arguments %q", fs.Args())
	}
	preset, ok := Profiles[c.Profile]
	if !ok {
		names := ProfileNames()
		sort.Strings(names)
		return c, fmt.Errorf("simagent: unknown profile %q (choose from %s)", c.Profile, strings.Join(names, ", "))
	}
	// Apply the preset, then every flag given explicitly again on top.
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
	preset(&c)
	for name, v := range given {
		if err := fs.Set(name, v); err != nil {
			return c, err
		}
	}
	if c.SpecPath == "" {
		return c, fmt.Errorf("simagent: -spec is required")
	}
	if c.Planner != "empty" && c.Planner != "fix" {
		return c, fmt.Errorf("simagent: -planner %q: want empty or fix", c.Planner)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"p", c.P}, {"lie", c.Lie}, {"crash", c.Crash}, {"hang", c.Hang}, {"regress", c.Regress}, {"background", c.Background}} {
		if p.v < 0 || p.v > 1 {
			return c, fmt.Errorf("simagent: -%s %v: want a probability in [0, 1]", p.name, p.v)
		}
	}
	if c.Crash+c.Hang > 1 {
		return c, fmt.Errorf("simagent: -crash + -hang must not exceed 1")
	}
	if c.SlowFactor <= 0 || c.Duration < 0 {
		return c, fmt.Errorf("simagent: -slow-factor must be positive and -duration not negative")
	}
	env := func(v *string, name string) {
		if *v == "" && getenv != nil {
			*v = getenv(name)
		}
	}
	env(&c.CallsLog, "AOT_SIM_CALLS")
	env(&c.PidsFile, "AOT_SIM_PIDS")
	env(&c.Ledger, "AOT_SIM_LEDGER")
	if getenv != nil {
		c.UsageFile = getenv("AOT_USAGE_FILE")
	}
	return c, nil
}
