package backend

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/aot-loop/aot/internal/agent"
)

// FileName is the agents file, beside the state file (.claude/aot-agents.yaml):
// which backend and model run each role, set once per project.
const FileName = "aot-agents.yaml"

// Spec is one role's agent.
type Spec struct {
	Agent     string   `yaml:"agent,omitempty" json:"agent"`
	Model     string   `yaml:"model,omitempty" json:"model,omitempty"`
	BaseURL   string   `yaml:"base_url,omitempty" json:"base_url,omitempty"`       // openai, anthropic: the endpoint
	APIKeyEnv string   `yaml:"api_key_env,omitempty" json:"api_key_env,omitempty"` // openai, anthropic: the variable holding the key
	Bin       string   `yaml:"bin,omitempty" json:"bin,omitempty"`                 // claude, codex, gemini: the executable
	Args      []string `yaml:"args,omitempty" json:"args,omitempty"`               // extra arguments for the CLI
	Command   string   `yaml:"command,omitempty" json:"command,omitempty"`         // exec: the shell command
}

// key identifies a setting: roles with equal settings share one agent.
func (s Spec) key() string {
	return strings.Join([]string{s.Agent, s.Model, s.BaseURL, s.APIKeyEnv, s.Bin, strings.Join(s.Args, "\x00"), s.Command}, "\x01")
}

// String is the setting in one short phrase, for aot status.
func (s Spec) String() string {
	out := s.Agent
	if s.Model != "" {
		out += " (model " + s.Model + ")"
	}
	if s.BaseURL != "" {
		out += " at " + s.BaseURL
	}
	if s.Agent == "exec" && s.Command != "" {
		out += ": " + s.Command
	}
	return out
}

// Config is the agents of a loop: a default for every role and per-role
// overrides.
type Config struct {
	Spec  `yaml:",inline"`
	Roles map[string]Spec `yaml:"roles,omitempty" json:"roles,omitempty"`
	// Path is the file the config came from, "" when none.
	Path string `yaml:"-" json:"-"`
	// from tells where each role's setting came from (file, flag).
	from map[string]string
}

// For is role's setting: its override merged over the default. An override
// naming another backend takes nothing from the default.
func (c Config) For(role agent.Role) Spec {
	s := c.Spec
	if s.Agent == "" {
		s.Agent = "exec"
	}
	o, ok := c.Roles[string(role)]
	if !ok {
		return s
	}
	if o.Agent != "" && o.Agent != s.Agent {
		return o
	}
	o.Agent = s.Agent
	for _, f := range []struct{ dst, src *string }{{&s.Model, &o.Model}, {&s.BaseURL, &o.BaseURL}, {&s.APIKeyEnv, &o.APIKeyEnv}, {&s.Bin, &o.Bin}, {&s.Command, &o.Command}} {
		if *f.src != "" {
			*f.dst = *f.src
		}
	}
	if o.Args != nil {
		s.Args = o.Args
	}
	return s
}

// where names the place role's setting came from, for errors.
func (c Config) where(role agent.Role) string {
	if w, ok := c.from[string(role)]; ok {
		return w
	}
	if _, ok := c.Roles[string(role)]; ok && c.Path != "" {
		return c.Path + ": roles." + string(role)
	}
	if c.Path != "" {
		return c.Path
	}
	return "the " + string(role) + " role"
}

// PathFor is the agents file of the loop whose state file is stateFile.
func PathFor(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), FileName)
}

// maxFile bounds the agents file.
const maxFile = 1 << 20

// Load reads the agents file beside stateFile; a missing file is the
// zero Config (every role on exec). Errors name the file and line.
func Load(stateFile string) (Config, error) {
	p := PathFor(stateFile)
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, err
	}
	if !fi.Mode().IsRegular() {
		return Config{}, fmt.Errorf("%s: not a regular file", p)
	}
	if fi.Size() > maxFile {
		return Config{}, fmt.Errorf("%s: %d bytes; an agents file has at most %d", p, fi.Size(), maxFile)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return Config{}, err
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", p, err)
	}
	c.Path = p
	return c, nil
}

// Parse reads an agents file's text: unknown keys and roles are errors.
func Parse(data []byte) (Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.Strict()); err != nil {
		return Config{}, errors.New(yaml.FormatError(err, false, true))
	}
	for role := range c.Roles {
		known := false
		for _, r := range agent.Roles {
			known = known || string(r) == role
		}
		if !known {
			return Config{}, fmt.Errorf("roles.%s: unknown role (roles: probe, worker, verifier, judge, planner, align)", role)
		}
	}
	return c, nil
}

// Override applies a run's flags: agent and model for every role, and
// ROLE=AGENT[:MODEL] settings. The flag wins over the file.
func (c *Config) Override(agentName, model string, roles []string) error {
	if c.from == nil {
		c.from = map[string]string{}
	}
	if agentName != "" {
		if agentName != c.Agent {
			c.Spec = Spec{Agent: agentName, Command: c.Command}
		}
		for _, r := range agent.Roles {
			c.from[string(r)] = "--agent " + agentName
		}
	}
	if model != "" {
		c.Model = model
	}
	for _, r := range roles {
		role, val, ok := strings.Cut(r, "=")
		if !ok || val == "" {
			return fmt.Errorf("--role %q: want ROLE=AGENT or ROLE=AGENT:MODEL", r)
		}
		known := false
		for _, k := range agent.Roles {
			known = known || string(k) == role
		}
		if !known {
			return fmt.Errorf("--role %q: unknown role %q (roles: probe, worker, verifier, judge, planner, align)", r, role)
		}
		name, m, _ := strings.Cut(val, ":")
		if c.Roles == nil {
			c.Roles = map[string]Spec{}
		}
		s := c.Roles[role]
		if s.Agent != name {
			s = Spec{}
		}
		s.Agent, s.Model = name, m
		c.Roles[role] = s
		c.from[role] = "--role " + r
	}
	return nil
}
