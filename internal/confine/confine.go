// Package confine keeps agent attempts in their place: every attempt runs
// under a guard, a re-run of the aot binary (the hidden command Command)
// that kills the attempt's whole process tree when the engine dies, however
// it dies (see proc.Guard), and, on Linux where the kernel has Landlock,
// confines the attempt's writes to its workdir, the git folders its commits
// need, the temp folder and the agent CLIs' own folders.
//
// Landlock restricts the calling process and its future children only, and
// a Go program must restrict all of its threads at once: the engine cannot
// confine a child without confining itself. The guard is the process that
// restricts itself, then starts the agent.
package confine

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/aot-loop/aot/internal/proc"
)

// Command is the hidden aot command that is the guard.
const Command = "agent-guard"

// Modes of --confine.
const (
	ModeAuto = "auto" // confine where the kernel allows it
	ModeOff  = "off"  // never confine (agents still die with the engine)
)

// Status says whether agents are confined, and why or why not, in a
// sentence for people.
type Status struct {
	On  bool   `json:"on"`
	Why string `json:"why"`
}

// Guard is how a run starts its agents: through the guard at Exe,
// confined (with Landlock) when Status.On.
type Guard struct {
	Exe    string // the aot binary
	Status Status
}

// New returns the guard for mode (ModeAuto or ModeOff) run from exe.
func New(mode, exe string) *Guard {
	if mode == ModeOff {
		return &Guard{Exe: exe, Status: Status{Why: "turned off (--confine off)"}}
	}
	return &Guard{Exe: exe, Status: Probe()}
}

// WithoutLandlock returns g that does not confine (nil if g is nil).
func (g *Guard) WithoutLandlock() *Guard {
	if g == nil || !g.Status.On {
		return g
	}
	return &Guard{Exe: g.Exe, Status: Status{Why: "the agent runs in its own sandbox"}}
}

type guardKey struct{}

// With returns a context whose agents run under g (nil: started directly).
func With(ctx context.Context, g *Guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// From returns the guard set by With, or nil.
func From(ctx context.Context) *Guard {
	g, _ := ctx.Value(guardKey{}).(*Guard)
	return g
}

// For returns how to start an attempt that works in workdir on the loop of
// stateFile ("" if none) with the extra environment env (entries override
// this process's environment); nil when g is nil.
func (g *Guard) For(workdir, stateFile string, env []string) *proc.Guard {
	if g == nil {
		return nil
	}
	// "aot" as the program's name: a test binary standing in for aot
	// (testscript) picks the command by it.
	args := []string{"aot", Command}
	if g.Status.On {
		args = append(args, "--landlock")
		for _, p := range Writable(workdir, stateFile, lookup(env)) {
			args = append(args, "--rw", p)
		}
	}
	return &proc.Guard{Path: g.Exe, Args: append(args, "--")}
}

// lookup reads a variable from env, else from this process's environment.
func lookup(env []string) func(string) string {
	return func(key string) string {
		v, found := "", false
		for _, kv := range env {
			if s, ok := strings.CutPrefix(kv, key+"="); ok {
				v, found = s, true
			}
		}
		if found {
			return v
		}
		return os.Getenv(key)
	}
}

// Writable lists where an attempt in workdir may write: the workdir; the
// git folders a commit there writes (a linked worktree's own admin folder
// and the repository's objects, refs and logs; a plain repository's .git);
// the temp folder; the folder of the state file (aot commands the agent
// runs update it and its lock); the folders where Claude Code, Codex and
// Gemini CLI keep their configuration, sessions and caches, and npm's
// cache. getenv reads the attempt's environment.
func Writable(workdir, stateFile string, getenv func(string) string) []string {
	var out []string
	add := func(p string) {
		if p != "" && filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	if abs, err := filepath.Abs(workdir); err == nil {
		add(abs)
		for _, p := range gitDirs(abs) {
			add(p)
		}
	}
	tmp := getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	add(tmp)
	if stateFile != "" {
		if real, err := filepath.EvalSymlinks(stateFile); err == nil {
			stateFile = real
		}
		add(filepath.Dir(stateFile))
	}
	home := getenv("HOME")
	or := func(v, def string) string {
		if v != "" {
			return v
		}
		if home == "" {
			return ""
		}
		return filepath.Join(home, def)
	}
	add(or(getenv("CLAUDE_CONFIG_DIR"), ".claude"))
	add(or("", ".claude.json"))
	add(or(getenv("CODEX_HOME"), ".codex"))
	add(or("", ".gemini"))
	add(or(getenv("XDG_CACHE_HOME"), ".cache"))
	add(or(getenv("npm_config_cache"), ".npm"))
	return out
}

// gitDirs returns the git folders a commit in dir writes, found from the
// .git in dir or the nearest folder above it: a plain repository's .git
// folder, or a linked worktree's admin folder and the common folder's
// objects, refs and logs.
func gitDirs(dir string) []string {
	for d := dir; ; d = filepath.Dir(d) {
		dotgit := filepath.Join(d, ".git")
		fi, err := os.Stat(dotgit)
		if err == nil && fi.IsDir() {
			return []string{dotgit}
		}
		if err == nil {
			return worktreeDirs(d, dotgit)
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// worktreeDirs reads a linked worktree's .git file ("gitdir: ADMIN") and
// the admin folder's commondir.
func worktreeDirs(top, dotgit string) []string {
	data, err := os.ReadFile(dotgit)
	if err != nil {
		return nil
	}
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
	if !ok {
		return nil
	}
	admin = strings.TrimSpace(admin)
	if !filepath.IsAbs(admin) {
		admin = filepath.Join(top, admin)
	}
	out := []string{admin}
	common := admin
	if data, err := os.ReadFile(filepath.Join(admin, "commondir")); err == nil {
		common = strings.TrimSpace(string(data))
		if !filepath.IsAbs(common) {
			common = filepath.Join(admin, common)
		}
	}
	for _, sub := range []string{"objects", "refs", "logs"} {
		out = append(out, filepath.Join(common, sub))
	}
	return out
}
