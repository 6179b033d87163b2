package preflight

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
)

// use is one distinct agent program and the roles that run it.
type use struct {
	spec    backend.Spec
	program string // the executable as configured ("" for the HTTP backends and a shell command aot cannot read)
	roles   []string
}

// uses groups roles by the program they run, in the order of roles.
func uses(cfg backend.Config, roles []agent.Role) []use {
	var out []use
	for _, r := range roles {
		s := cfg.For(r)
		program := s.Bin
		switch {
		case s.Agent == "exec":
			program = execProgram(s.Command)
		case program == "" && cliOf[s.Agent].install != "":
			program = s.Agent
		}
		u := use{spec: s, program: program}
		i := slices.IndexFunc(out, func(v use) bool { return v.key() == u.key() })
		if i < 0 {
			out = append(out, u)
			i = len(out) - 1
		}
		out[i].roles = append(out[i].roles, string(r))
	}
	return out
}

func (u use) key() string {
	k := u.spec.Agent + "\x00" + u.program + "\x00" + u.spec.APIKeyEnv
	if u.spec.Agent == "exec" {
		k += "\x00" + u.spec.Command
	}
	return k
}

func (u use) name() string {
	if u.spec.Agent == "exec" {
		return "exec agent"
	}
	return u.spec.Agent
}

func (u use) rolesPhrase() string {
	if len(u.roles) == 1 {
		return "the " + u.roles[0] + " role"
	}
	return "the roles " + strings.Join(u.roles, ", ")
}

// cli is what the checks know of an agent CLI.
type cli struct {
	product string
	install string
}

var cliOf = map[string]cli{
	"claude": {"Claude Code", "npm install -g @anthropic-ai/claude-code"},
	"codex":  {"Codex CLI", "npm install -g @openai/codex"},
	"gemini": {"Gemini CLI", "npm install -g @google/gemini-cli"},
}

// Programs checks that every program the roles run is there: a CLI on
// PATH (or at its bin:), an exec agent's command's program on PATH or in
// root. With versions, each CLI's --version is run too (at most a few
// seconds each, all at once).
func Programs(ctx context.Context, cfg backend.Config, roles []agent.Role, root string, env Env, versions bool) []Check {
	list := uses(cfg, roles)
	out := make([]Check, len(list))
	var wg sync.WaitGroup
	for i, u := range list {
		path, c := program(u, cfg, root, env)
		out[i] = c
		if !versions || path == "" || u.spec.Agent == "exec" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := version(ctx, path)
			if err != nil {
				out[i] = fail(u.name(), fmt.Sprintf("%s is there but `%s --version` failed: %v", path, u.program, err),
					"reinstall it ("+cliOf[u.spec.Agent].install+") or point bin: in the agents file at a working one")
				return
			}
			out[i].Detail += ", version " + v
		}()
	}
	wg.Wait()
	return out
}

// program finds u's executable: its path, and the check saying so.
func program(u use, cfg backend.Config, root string, env Env) (string, Check) {
	name := u.name()
	switch {
	case u.spec.Agent == "exec" && u.program == "":
		return "", ok(name, fmt.Sprintf("%q for %s runs through the shell (its program is not checked)", u.spec.Command, u.rolesPhrase()))
	case u.program == "":
		return "", ok(name, fmt.Sprintf("HTTP to the model for %s (no program to find)", u.rolesPhrase()))
	}
	where := "bin: in the agents file (" + backend.FileName + " beside the state file)"
	if cfg.Path != "" {
		where = "bin: in " + cfg.Path
	}
	if u.spec.Agent == "exec" {
		where = "--agent-command, AOT_AGENT_COMMAND or command: in the agents file"
	}
	p := u.program
	if strings.ContainsRune(p, '/') {
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		if err := executable(p); err != nil {
			return "", fail(name, fmt.Sprintf("%s (for %s) cannot run: %v", u.program, u.rolesPhrase(), err), "fix the path in "+where)
		}
		return p, ok(name, fmt.Sprintf("%s for %s", u.program, u.rolesPhrase()))
	}
	found, err := env.lookPath(p)
	if err != nil {
		fix := "install it, put its folder on PATH or name another program in " + where
		if c, known := cliOf[u.spec.Agent]; known {
			fix = fmt.Sprintf("install %s (%s) and put it on PATH, or name the executable with %s", c.product, c.install, where)
		}
		return "", fail(name, fmt.Sprintf("%s (for %s) is not found on PATH", p, u.rolesPhrase()), fix)
	}
	return found, ok(name, fmt.Sprintf("%s for %s", found, u.rolesPhrase()))
}

// executable says why path is not a program to run, or nil.
func executable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errors.New("no such file")
	case err != nil:
		return err
	case fi.IsDir():
		return errors.New("a folder, not a program")
	case fi.Mode()&0o111 == 0 && runtime.GOOS != "windows": // Windows has no executable bit
		return errors.New("not executable (chmod +x it)")
	}
	return nil
}

// versionTimeout bounds one `--version`: a Node CLI on a busy machine
// takes seconds to start.
const versionTimeout = 20 * time.Second

// version runs `path --version` and returns its first line.
func version(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.WaitDelay = time.Second
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("no answer within %s", versionTimeout)
	}
	if err != nil {
		if line := lastLine(stderr.String()); line != "" {
			return "", fmt.Errorf("%v: %s", err, line)
		}
		return "", err
	}
	v := firstLine(out.String())
	if v == "" {
		v = "(printed nothing)"
	}
	return v, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return strings.TrimSpace(s)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return firstLine(lines[len(lines)-1])
}

// shellWords are the builtins and keywords an exec command may start with:
// no program to look for.
var shellWords = map[string]bool{
	"!": true, ".": true, ":": true, "[": true, "{": true, "(": true, "alias": true, "cd": true, "case": true,
	"echo": true, "eval": true, "exit": true, "export": true, "false": true, "for": true, "if": true,
	"printf": true, "read": true, "set": true, "source": true, "test": true, "true": true, "trap": true,
	"ulimit": true, "umask": true, "unset": true, "until": true, "wait": true, "while": true,
}

// execProgram is the program a shell command runs first, "" when it starts
// with a builtin or holds shell syntax aot does not read.
func execProgram(command string) string {
	fields := strings.Fields(command)
	for len(fields) > 0 {
		w := fields[0]
		switch {
		case shellWords[w]:
			return ""
		case w == "exec" || w == "command":
			fields = fields[1:]
			if len(fields) > 0 && strings.HasPrefix(fields[0], "-") {
				return "" // exec -a NAME, command -v: not read
			}
			continue
		case strings.ContainsAny(w, "$`'\"\\(){};|&<>*?[~"):
			return ""
		case strings.IndexByte(w, '=') > 0: // VAR=value before the program
			fields = fields[1:]
			continue
		}
		return w
	}
	return ""
}
