package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// cliBins says where `make agent-clis` installs each CLI, under
// $HOME/.cache/aot/agent-clis, and which variable overrides that.
var cliBins = map[string]struct{ env, rel string }{
	"claude": {"AOT_CLAUDE_BIN", "claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude"},
	"codex":  {"AOT_CODEX_BIN", "codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"},
	"gemini": {"AOT_GEMINI_BIN", "gemini/node_modules/.bin/gemini"},
}

// CLIPath finds a real agent CLI ("claude", "codex" or "gemini"): the path
// in AOT_CLAUDE_BIN / AOT_CODEX_BIN / AOT_GEMINI_BIN, else where
// `make agent-clis` installs it ($AOT_AGENT_CLIS, default
// ~/.cache/aot/agent-clis). The error says how to install it.
func CLIPath(name string) (string, error) {
	bin, ok := cliBins[name]
	if !ok {
		return "", fmt.Errorf("unknown agent CLI %q", name)
	}
	path := os.Getenv(bin.env)
	if path == "" {
		dir := os.Getenv("AOT_AGENT_CLIS") // where scripts/agent-clis.sh installs
		if dir == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("find %s CLI: %w", name, err)
			}
			dir = filepath.Join(home, ".cache", "aot", "agent-clis")
		}
		path = filepath.Join(dir, filepath.FromSlash(bin.rel))
	}
	fi, err := os.Stat(path)
	if err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
		err = fmt.Errorf("not an executable file")
	}
	if err != nil {
		return "", fmt.Errorf("%s CLI not usable at %s (%v): run `make agent-clis` or set %s", name, path, err, bin.env)
	}
	return path, nil
}

// dummyKey is the API key every CLI is given; the fake server ignores it.
const dummyKey = "fakellm-dummy-key"

// ClaudeEnv is the environment that points Claude Code at the fake server
// at url with home as HOME, offline: no telemetry, updater, error reports or
// other non-essential traffic (so no title request either). Append it to a
// small base environment (PATH and the like): credentials or provider
// switches inherited from a developer's shell would still apply. As root, Claude Code also needs --allowedTools or
// --permission-mode acceptEdits (--dangerously-skip-permissions is refused
// unless IS_SANDBOX=1).
func ClaudeEnv(home, url string) []string {
	return []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + strings.TrimRight(url, "/"),
		"ANTHROPIC_API_KEY=" + dummyKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	}
}

// CodexHome writes dir/config.toml so that Codex uses the fake server at
// url through the Responses API (the only wire API it accepts), with its
// own retries off and analytics disabled, and returns the environment to
// append: CODEX_HOME and HOME are dir. Callers may append tables to the
// file; top-level keys must go before its first table.
func CodexHome(dir, url string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("codex home: %w", err)
	}
	config := fmt.Sprintf(`model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = %q
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`, strings.TrimRight(url, "/")+"/v1")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o644); err != nil {
		return nil, fmt.Errorf("codex home: %w", err)
	}
	return []string{
		"HOME=" + dir,
		"CODEX_HOME=" + dir,
		"FAKE_API_KEY=" + dummyKey,
	}, nil
}

// GeminiEnv writes home/.gemini/settings.json for API-key auth without
// usage statistics or update checks (keeping any other settings already in
// the file, such as hooks) and returns the environment to append: HOME,
// the key, the base URL, and the variables that trust the workspace (else
// --yolo is downgraded) and stop Gemini CLI from relaunching itself.
func GeminiEnv(home, url string) ([]string, error) {
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("gemini settings: %w", err)
	}
	path := filepath.Join(dir, "settings.json")
	settings := object{}
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &settings); err != nil {
			return nil, fmt.Errorf("gemini settings %s: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gemini settings: %w", err)
	}
	set := func(section, key string, v any) {
		s := obj(settings[section])
		if s == nil {
			s = object{}
			settings[section] = s
		}
		s[key] = v
	}
	set("security", "auth", object{"selectedType": "gemini-api-key"})
	set("security", "folderTrust", object{"enabled": false})
	set("privacy", "usageStatisticsEnabled", false)
	set("general", "disableAutoUpdate", true)
	set("general", "disableUpdateNag", true)
	data, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("gemini settings: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("gemini settings: %w", err)
	}
	return []string{
		"HOME=" + home,
		"GEMINI_API_KEY=" + dummyKey,
		"GOOGLE_GEMINI_BASE_URL=" + strings.TrimRight(url, "/"),
		"GEMINI_CLI_TRUST_WORKSPACE=true",
		"GEMINI_CLI_NO_RELAUNCH=true",
		"NO_BROWSER=true",
	}, nil
}
