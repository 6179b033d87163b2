package simagent

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/agent"
)

// Fates of a call, drawn before it does anything.
const (
	FateOK    = "ok"
	FateCrash = "crash"
	FateHang  = "hang"
)

// Env is what a call touches outside its files; tests replace the parts that
// would kill or stall the test process.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Pid    int
	// Kill ends the process at once (SIGKILL to itself); it does not return
	// in the real sim.
	Kill func()
	// Sleep waits; a hang is one long Sleep.
	Sleep func(time.Duration)
	// StartBackground starts `sleep 1000` in the background, in the call's
	// process group, and returns its pid.
	StartBackground func() (int, error)
	// Now stamps the calls log.
	Now func() time.Time
}

// ErrCrashed is returned by Run after Env.Kill returned (only in tests).
var ErrCrashed = errors.New("simagent: crashed")

// ErrHung is returned by Run when a hang ends without the runner killing it.
var ErrHung = errors.New("simagent: hung until -hang-for passed")

type sim struct {
	cfg   Config
	env   Env
	spec  *Spec
	task  agent.Task
	dir   string
	usage agent.Usage
}

// Run answers one task: it reads it from env.Stdin, does the work in the
// task's workdir and writes one JSON answer to env.Stdout (or half of one,
// when it crashes).
func Run(cfg Config, env Env) error {
	spec, err := ReadSpec(cfg.SpecPath)
	if err != nil {
		return err
	}
	var t agent.Task
	if err := json.NewDecoder(env.Stdin).Decode(&t); err != nil {
		return fmt.Errorf("simagent: read task: %w", err)
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	s := &sim{cfg: cfg, env: env, spec: spec, task: t, dir: t.Workdir}
	if s.dir == "" {
		if s.dir, err = os.Getwd(); err != nil {
			return err
		}
	}
	return s.run()
}

// Draw is the sim's PRNG: a uniform number in [0, 1) that depends only on
// the seed and the key's parts (SHA-256 of them, so that keys differing in
// one character draw independently).
func Draw(seed uint64, parts ...string) float64 {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	for _, p := range parts {
		binary.LittleEndian.PutUint64(b[:], uint64(len(p)))
		h.Write(b[:])
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	return float64(binary.LittleEndian.Uint64(sum)>>11) / (1 << 53)
}

func (s *sim) draw(purpose, key string, attempt int) float64 {
	return Draw(s.cfg.Seed, purpose, key, strconv.Itoa(attempt))
}

// Fate is what a call of this role on this atom and attempt will do.
func Fate(cfg Config, role agent.Role, atom string, attempt int) string {
	u := Draw(cfg.Seed, "fate", string(role)+"/"+atom, strconv.Itoa(attempt))
	switch {
	case u < cfg.Crash:
		return FateCrash
	case u < cfg.Crash+cfg.Hang:
		return FateHang
	}
	return FateOK
}

func (s *sim) run() error {
	t := s.task
	fate := Fate(s.cfg, t.Role, t.Atom.ID, t.Attempt)
	call, _ := json.Marshal(map[string]any{
		"pid": s.env.Pid, "role": t.Role, "atom": t.Atom.ID, "attempt": t.Attempt, "fate": fate,
		"unix_ms": s.env.Now().UnixMilli(),
	})
	if err := appendLine(s.cfg.CallsLog, call); err != nil {
		return err
	}
	if err := appendLine(s.cfg.PidsFile, fmt.Appendf(nil, "%d agent %s %s %d", s.env.Pid, t.Role, t.Atom.ID, t.Attempt)); err != nil {
		return err
	}
	if s.cfg.Background > 0 && s.draw("background", string(t.Role)+"/"+t.Atom.ID, t.Attempt) < s.cfg.Background && s.env.StartBackground != nil {
		pid, err := s.env.StartBackground()
		if err != nil {
			return fmt.Errorf("simagent: start background child: %w", err)
		}
		if err := appendLine(s.cfg.PidsFile, fmt.Appendf(nil, "%d background", pid)); err != nil {
			return err
		}
	}
	if fate == FateHang {
		fmt.Fprintf(s.env.Stderr, "simagent: %s %s attempt %d hangs\n", t.Role, t.Atom.ID, t.Attempt)
		s.env.Sleep(s.cfg.HangFor)
		return ErrHung
	}
	var ans map[string]any
	var err error
	switch t.Role {
	case agent.Worker:
		ans, err = s.worker(fate == FateCrash)
	case agent.Probe:
		s.modelCall(t.Atom.ID, false)
		ans = s.probe()
	case agent.Planner:
		s.modelCall(t.Atom.ID, false)
		ans = map[string]any{"atoms": s.plan()}
	case agent.Judge, agent.Verifier:
		s.modelCall(t.Atom.ID, false)
		ans = map[string]any{"passed": true, "evidence": "the sim judges nothing"}
	default:
		return fmt.Errorf("simagent: unknown role %q", t.Role)
	}
	if err != nil {
		return err
	}
	ans["usage"] = s.usage
	data, err := json.Marshal(ans)
	if err != nil {
		return err
	}
	if fate == FateCrash {
		return s.crash(data)
	}
	_, err = s.env.Stdout.Write(append(data, '\n'))
	return err
}

// crash prints half an answer and kills the process.
func (s *sim) crash(answer []byte) error {
	fmt.Fprintf(s.env.Stderr, "simagent: %s %s attempt %d crashes\n", s.task.Role, s.task.Atom.ID, s.task.Attempt)
	_, _ = s.env.Stdout.Write(answer[:len(answer)/2])
	if f, ok := s.env.Stdout.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
	s.env.Kill()
	return ErrCrashed
}

// modelCall is one simulated model call: its usage goes to AOT_USAGE_FILE
// and the ledger before the work, then it takes its time.
func (s *sim) modelCall(key string, slow bool) {
	u := agent.Usage{InputTokens: s.cfg.TokensIn, OutputTokens: s.cfg.TokensOut}
	u.CostUSD = (float64(u.InputTokens)*s.cfg.USDPerMTokIn + float64(u.OutputTokens)*s.cfg.USDPerMTokOut) / 1e6
	s.usage.InputTokens += u.InputTokens
	s.usage.OutputTokens += u.OutputTokens
	s.usage.CostUSD += u.CostUSD
	line, _ := json.Marshal(u)
	_ = appendLine(s.cfg.UsageFile, line)
	_ = appendLine(s.cfg.Ledger, line)
	d := float64(s.cfg.Duration) * (0.5 + s.draw("duration", key, s.task.Attempt))
	if slow {
		d *= s.cfg.SlowFactor
	}
	if d > 0 {
		s.env.Sleep(time.Duration(d))
	}
}

// worker does an atom's work, or with the goal atom every remaining
// deliverable in dependency order. With crash set it dies halfway.
func (s *sim) worker(crash bool) (map[string]any, error) {
	t := s.task
	if t.Atom.ID == s.spec.GoalAtom {
		return s.whole(crash)
	}
	d, alt := s.spec.Lookup(t.Atom.ID)
	if d == nil {
		s.modelCall(t.Atom.ID, false)
		return map[string]any{"success": false, "summary": "no such deliverable in this project: " + t.Atom.ID}, nil
	}
	r := s.attempt(d, alt, t.Atom.ID, t.Attempt)
	return map[string]any{"success": r.claimed, "summary": r.summary, "artifacts": []string{filepath.ToSlash(File(d.Name))}}, nil
}

type outcome struct {
	done    bool // the file is right now
	claimed bool // the agent says it is
	summary string
}

// attempt is one try at a deliverable (one model call), keyed by the atom (or
// the alternative, in a whole-goal call) and the attempt number.
func (s *sim) attempt(d *Deliverable, alt *Alternative, key string, attempt int) outcome {
	s.modelCall(key, d.Slow)
	if Done(s.dir, d.Name) {
		return outcome{done: true, claimed: true, summary: d.Name + " was already done"}
	}
	why := ""
	for _, dep := range d.DependsOn {
		if !Done(s.dir, dep) {
			why = fmt.Sprintf("%s needs %s, which is not done (%s)", d.Name, dep, filepath.ToSlash(File(dep)))
			break
		}
	}
	if why == "" && alt != nil && !alt.Works {
		why = fmt.Sprintf("the approach of %s does not work for %s", alt.Atom, d.Name)
	}
	if why == "" {
		if s.draw("success", key, attempt) < s.cfg.P {
			if err := s.write(d.Name, Content(d.Name)); err != nil {
				return outcome{summary: "could not write " + File(d.Name) + ": " + err.Error()}
			}
			s.regress(d, key, attempt)
			return outcome{done: true, claimed: true, summary: "wrote " + filepath.ToSlash(File(d.Name))}
		}
		why = fmt.Sprintf("%s: the tests still fail after attempt %d", d.Name, attempt)
	}
	if s.draw("lie", key, attempt) < s.cfg.Lie {
		if s.draw("junk", key, attempt) < 0.5 {
			_ = s.write(d.Name, d.Name+" wip\n")
		}
		return outcome{claimed: true, summary: "wrote " + filepath.ToSlash(File(d.Name)) + ", all done"}
	}
	return outcome{summary: why}
}

// regress breaks another done deliverable after a success, with probability
// Regress; the agent does not notice.
func (s *sim) regress(d *Deliverable, key string, attempt int) {
	if s.cfg.Regress <= 0 || s.draw("regress", key, attempt) >= s.cfg.Regress {
		return
	}
	var victims []string
	for _, o := range s.spec.Deliverables {
		if o.Name != d.Name && Done(s.dir, o.Name) {
			victims = append(victims, o.Name)
		}
	}
	if len(victims) == 0 {
		return
	}
	v := victims[int(s.draw("victim", key, attempt)*float64(len(victims)))]
	_ = s.write(v, v+" broken\n")
	fmt.Fprintf(s.env.Stderr, "simagent: %s broke %s\n", key, v)
}

// whole attempts every deliverable not done yet, in dependency order, each
// with its own draw keyed by the call's attempt; an OR deliverable tries its
// approaches in order. It says done when it believes everything is.
func (s *sim) whole(crash bool) (map[string]any, error) {
	order, err := s.spec.Order()
	if err != nil {
		return nil, err
	}
	s.modelCall(s.spec.GoalAtom, false) // read the project, plan the work
	var remaining []*Deliverable
	for _, d := range order {
		if !Done(s.dir, d.Name) {
			remaining = append(remaining, d)
		}
	}
	stop := len(remaining)
	if crash {
		stop = (len(remaining) + 1) / 2
	}
	var did, failed []string
	believed := true
	for _, d := range remaining[:stop] {
		var r outcome
		if len(d.Alternatives) == 0 {
			r = s.attempt(d, nil, d.Name, s.task.Attempt)
		} else {
			for i := range d.Alternatives {
				a := &d.Alternatives[i]
				if r = s.attempt(d, a, a.Atom, s.task.Attempt); r.claimed {
					break
				}
			}
		}
		if r.claimed {
			did = append(did, d.Name)
		} else {
			failed = append(failed, r.summary)
			believed = false
		}
	}
	summary := fmt.Sprintf("attempted %d deliverables; done: %s", stop, orNone(did))
	if len(failed) > 0 {
		summary += "; failed: " + strings.Join(failed, "; ")
	}
	arts := make([]string, 0, len(did))
	for _, n := range did {
		arts = append(arts, filepath.ToSlash(File(n)))
	}
	return map[string]any{"success": believed, "summary": summary, "artifacts": arts}, nil
}

// probe answers a probe: an approach that never works is found infeasible,
// anything else feasible.
func (s *sim) probe() map[string]any {
	t := s.task
	if d, alt := s.spec.Lookup(t.Atom.ID); alt != nil && !alt.Works {
		return map[string]any{"feasible": false, "findings": fmt.Sprintf("the approach of %s cannot produce %s", alt.Atom, File(d.Name))}
	}
	return map[string]any{"feasible": true, "findings": t.Atom.ID + " looks feasible; last failure: " + oneLine(t.LastFailure)}
}

// plan answers a planner: nothing, or with -planner fix one atom per
// deliverable whose file is not right (after a failed base case).
func (s *sim) plan() []agent.PlannedAtom {
	atoms := []agent.PlannedAtom{}
	if s.cfg.Planner != "fix" || len(s.task.Failures) == 0 {
		return atoms
	}
	order, err := s.spec.Order()
	if err != nil {
		return atoms
	}
	proposed := map[string]string{}
	for _, d := range order {
		if Done(s.dir, d.Name) {
			continue
		}
		id := fmt.Sprintf("%s%s%d", d.Name, fixMark, s.task.Attempt)
		deps := []string{}
		for _, dep := range d.DependsOn {
			if p, ok := proposed[dep]; ok {
				deps = append(deps, p)
			}
		}
		proposed[d.Name] = id
		atoms = append(atoms, agent.PlannedAtom{ID: id, Description: "Redo " + d.Name + ": " + CheckCommand(d.Name) + " fails", DependsOn: deps})
	}
	return atoms
}

func (s *sim) write(name, content string) error {
	p := filepath.Join(s.dir, File(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

// appendLine appends one line to path in a single O_APPEND write; no path,
// no write.
func appendLine(path string, line []byte) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line[:len(line):len(line)], '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
