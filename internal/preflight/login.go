package preflight

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
)

// Logins checks, without sending a request, that each agent the roles run
// can authenticate: an API key in the environment or the CLI's own login
// file. The exec agent has no login to check.
func Logins(cfg backend.Config, roles []agent.Role, env Env) []Check {
	var out []Check
	seen := map[string]bool{}
	for _, u := range uses(cfg, roles) {
		k := u.spec.Agent + "\x00" + u.spec.APIKeyEnv
		if u.spec.Agent == "exec" || seen[k] {
			continue
		}
		seen[k] = true
		name := u.spec.Agent + " login"
		var c Check
		switch u.spec.Agent {
		case "claude":
			c = claudeLogin(env)
		case "codex":
			c = codexLogin(env)
		case "gemini":
			c = geminiLogin(env)
		case "openai", "anthropic":
			c = keyLogin(u.spec, env)
		default:
			continue
		}
		c.Name = name
		out = append(out, c)
	}
	return out
}

// anyKey is the first of vars set in the environment.
func anyKey(env Env, vars ...string) string {
	for _, v := range vars {
		if env.getenv(v) != "" {
			return v
		}
	}
	return ""
}

func exists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func claudeLogin(env Env) Check {
	if k := anyKey(env, "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"); k != "" {
		return ok("", k+" is set")
	}
	if k := anyKey(env, "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"); k != "" {
		return ok("", k+" is set: the cloud's own credentials are used (not checked here)")
	}
	dir := env.getenv("CLAUDE_CONFIG_DIR")
	if dir == "" {
		dir = filepath.Join(env.Home, ".claude")
	}
	if p := filepath.Join(dir, ".credentials.json"); exists(p) {
		return ok("", "logged in ("+p+")")
	}
	if data, err := os.ReadFile(filepath.Join(dir, "settings.json")); err == nil && bytes.Contains(data, []byte(`"apiKeyHelper"`)) {
		return ok("", "an apiKeyHelper in "+filepath.Join(dir, "settings.json")+" gives the key")
	}
	const fix = "set ANTHROPIC_API_KEY, or run `claude` once and log in with /login (`claude setup-token` prints a CLAUDE_CODE_OAUTH_TOKEN for machines without a browser)"
	if runtime.GOOS == "darwin" {
		return warn("", "no API key in the environment; a login kept in the macOS keychain is not checked", fix)
	}
	return fail("", fmt.Sprintf("no API key (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN) and no login (%s)", filepath.Join(dir, ".credentials.json")), fix)
}

// Compiled on first use, not when aot starts (every command would pay).
var (
	tomlProvider = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*model_provider\s*=\s*"([^"]*)"`) })
	tomlEnvKey   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*env_key\s*=\s*"([^"]*)"`) })
)

func codexLogin(env Env) Check {
	dir := env.getenv("CODEX_HOME")
	if dir == "" {
		dir = filepath.Join(env.Home, ".codex")
	}
	config := filepath.Join(dir, "config.toml")
	if data, err := os.ReadFile(config); err == nil {
		// A provider of one's own names the variable holding its key.
		if m := tomlProvider().FindSubmatch(data); m != nil && string(m[1]) != "openai" {
			var keys []string
			for _, k := range tomlEnvKey().FindAllSubmatch(data, -1) {
				keys = append(keys, string(k[1]))
			}
			if k := anyKey(env, keys...); k != "" {
				return ok("", fmt.Sprintf("%s is set (model_provider %q in %s)", k, m[1], config))
			}
			if len(keys) > 0 {
				return fail("", fmt.Sprintf("model_provider %q in %s takes its key from %s, which is empty", m[1], config, strings.Join(keys, " or ")),
					"set "+keys[0])
			}
		}
	}
	if k := anyKey(env, "CODEX_API_KEY", "OPENAI_API_KEY"); k != "" {
		return ok("", k+" is set")
	}
	if p := filepath.Join(dir, "auth.json"); exists(p) {
		return ok("", "logged in ("+p+")")
	}
	return fail("", fmt.Sprintf("no API key (CODEX_API_KEY, OPENAI_API_KEY) and no login (%s)", filepath.Join(dir, "auth.json")),
		"run `codex login` (or `printenv OPENAI_API_KEY | codex login --with-api-key`), or set CODEX_API_KEY")
}

// geminiAuth is the auth type Gemini CLI's settings choose: without one a
// headless Gemini CLI exits 41 ("Invalid auth method selected"), even with
// a key in the environment.
func geminiAuth(settings string) string {
	data, err := os.ReadFile(settings)
	if err != nil {
		return ""
	}
	var s struct {
		Security struct {
			Auth struct {
				SelectedType string `json:"selectedType"`
			} `json:"auth"`
		} `json:"security"`
		SelectedAuthType string `json:"selectedAuthType"` // before 0.3
	}
	if json.Unmarshal(data, &s) != nil {
		return ""
	}
	if s.Security.Auth.SelectedType != "" {
		return s.Security.Auth.SelectedType
	}
	return s.SelectedAuthType
}

// dotenvHas reports whether one of files sets key (Gemini CLI reads its
// key from ~/.gemini/.env and ~/.env too).
func dotenvHas(key string, files ...string) string {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
			if v, found := strings.CutPrefix(line, key+"="); found && strings.Trim(v, `"' `) != "" {
				return f
			}
		}
	}
	return ""
}

func geminiLogin(env Env) Check {
	dir := filepath.Join(env.Home, ".gemini")
	settings := filepath.Join(dir, "settings.json")
	key := anyKey(env, "GEMINI_API_KEY")
	if key == "" {
		if f := dotenvHas("GEMINI_API_KEY", filepath.Join(dir, ".env"), filepath.Join(env.Home, ".env")); f != "" {
			key = "GEMINI_API_KEY in " + f
		}
	}
	oauth := filepath.Join(dir, "oauth_creds.json")
	switch t := geminiAuth(settings); t {
	case "":
		return fail("", "no auth type chosen in "+settings+": a headless Gemini CLI exits 41 (Invalid auth method)",
			`add "security": {"auth": {"selectedType": "gemini-api-key"}} to it and set GEMINI_API_KEY, or run gemini once and log in with Google`)
	case "gemini-api-key":
		if key == "" {
			return fail("", settings+" chooses gemini-api-key but GEMINI_API_KEY is empty", "set GEMINI_API_KEY (a key from Google AI Studio)")
		}
		return ok("", key+" is set (auth type gemini-api-key)")
	case "oauth-personal":
		if !exists(oauth) {
			return fail("", settings+" chooses a Google login but there is none ("+oauth+")", "run gemini once and log in with Google")
		}
		return ok("", "logged in with Google ("+oauth+")")
	case "vertex-ai":
		if anyKey(env, "GOOGLE_API_KEY") == "" && (env.getenv("GOOGLE_CLOUD_PROJECT") == "" || env.getenv("GOOGLE_CLOUD_LOCATION") == "") {
			return fail("", settings+" chooses Vertex AI but neither GOOGLE_API_KEY nor GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION are set", "set them (and gcloud auth application-default login)")
		}
		return ok("", "Vertex AI (auth type vertex-ai)")
	default:
		return warn("", "auth type "+t+" in "+settings+" (not checked here)", "make sure `gemini -p hi` answers on this machine")
	}
}

// keyLogin is the key check of the HTTP backends (openai, anthropic).
func keyLogin(s backend.Spec, env Env) Check {
	vars := []string{s.APIKeyEnv}
	if s.APIKeyEnv == "" {
		vars = []string{"OPENAI_API_KEY"}
		if s.Agent == "anthropic" {
			vars = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}
		}
	}
	if k := anyKey(env, vars...); k != "" {
		return ok("", k+" is set")
	}
	return fail("", "$"+vars[0]+" is empty", "set "+vars[0]+" (or name another variable with api_key_env: in the agents file)")
}
