// Package plugin writes the AoT Loop's client integrations: the Claude Code
// plugin (manifest, hooks, commands, agents, skill) from files embedded in
// the binary, and the hook configuration of Codex and Gemini CLI. Every hook
// calls `aot hook CLIENT EVENT`, so that aot makes every decision.
package plugin

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// claudeFiles is the Claude Code plugin, less its hooks/hooks.json, which
// names the aot binary and is made by ClaudeHooks.
//
//go:embed all:claude
var claudeFiles embed.FS

// DefaultDir is where aot plugin install puts the Claude Code plugin.
const DefaultDir = ".claude/plugins/aot-loop"

// What happened to a file.
const (
	Written   = "written"   // it did not exist
	Replaced  = "replaced"  // it existed with other content
	Updated   = "updated"   // a shared configuration file got aot's hooks, the rest kept
	Unchanged = "unchanged" // it already held exactly this
)

// File is one file an install wrote or found already in place.
type File struct {
	Path   string `json:"path"`
	Action string `json:"action"`
}

// ConflictError is an install refused because the plugin directory already
// holds different files (another plugin, an older version, local edits).
type ConflictError struct {
	Dir   string
	Files []string // relative to Dir
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s already holds a different plugin (%s differ%s); use --force to replace them",
		e.Dir, strings.Join(e.Files, ", "), map[bool]string{true: "s", false: ""}[len(e.Files) == 1])
}

// HookCommand is the shell command a client runs for one hook: the aot
// binary (a name found on PATH, or an absolute path, quoted when it must be)
// with `hook CLIENT EVENT`. The clients read exit status 2 as "block" with
// stderr as the reason, so an aot that fails that way (an older aot without
// `hook`, a usage error) would hold a session forever: `|| true` makes any
// failure no decision.
func HookCommand(aot, client, event string) string {
	if strings.TrimSuffix(filepath.Base(aot), ".exe") == "aot-hook" {
		// The dedicated hook binary: the same answers, a faster start.
		return shellQuote(aot) + " " + client + " " + event + " || true"
	}
	return shellQuote(aot) + " hook " + client + " " + event + " || true"
}

// shellSafe says whether s needs no quoting: one or more of A-Z a-z 0-9 _ . / + : -
// (a loop, not a regular expression compiled when every aot command starts).
func shellSafe(s string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_./+:-", c) >= 0) {
			return false
		}
	}
	return s != ""
}

func shellQuote(s string) string {
	if shellSafe(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// handler is one command hook in the shape Claude Code, Codex and Gemini
// CLI share.
type handler struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout,omitempty"`
}

// group is a matcher and its hooks.
type group struct {
	Matcher string    `json:"matcher,omitempty"`
	Hooks   []handler `json:"hooks"`
}

// binding is one client event bound to one aot hook event.
type binding struct {
	Event   string // the client's name of the event
	AotArg  string // aot hook CLIENT <AotArg>
	Matcher string
	Timeout int // seconds (Claude Code, Codex); Gemini takes milliseconds
}

var (
	claudeHooks = []binding{
		{Event: "SubagentStop", AotArg: "subagent-stop"},
		{Event: "Stop", AotArg: "stop"},
		// Every tool call waits for it: a short limit, and an error or a
		// timeout is no decision, so the client asks the person.
		{Event: "PreToolUse", AotArg: "pre-tool-use", Matcher: "*", Timeout: 10},
	}
	codexHooks = []binding{
		{Event: "Stop", AotArg: "stop"},
		{Event: "PreToolUse", AotArg: "pre-tool-use", Matcher: "*", Timeout: 10},
	}
	geminiHooks = []binding{
		{Event: "AfterAgent", AotArg: "after-agent"},
		{Event: "BeforeTool", AotArg: "before-tool", Matcher: ".*", Timeout: 10000},
	}
)

func groupFor(aot, client string, b binding) group {
	return group{Matcher: b.Matcher, Hooks: []handler{{Type: "command", Command: HookCommand(aot, client, b.AotArg), Timeout: b.Timeout}}}
}

// ClaudeHooks is the plugin's hooks/hooks.json for the aot binary aot.
func ClaudeHooks(aot string) []byte {
	doc := struct {
		Description string             `json:"description"`
		Hooks       map[string][]group `json:"hooks"`
	}{
		Description: "AoT Loop: the continuation and permission decisions are made by aot (aot hook claude ...)",
		Hooks:       map[string][]group{},
	}
	for _, b := range claudeHooks {
		doc.Hooks[b.Event] = []group{groupFor(aot, "claude", b)}
	}
	return marshal(doc)
}

// ClaudePlugin is every file of the Claude Code plugin, by slash-separated
// path relative to the plugin directory.
func ClaudePlugin(aot string) (map[string][]byte, error) {
	out := map[string][]byte{"hooks/hooks.json": ClaudeHooks(aot)}
	err := fs.WalkDir(claudeFiles, "claude", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := claudeFiles.ReadFile(p)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(p, "claude/")] = data
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded plugin: %w", err)
	}
	return out, nil
}

// InstallClaude writes the Claude Code plugin into dir. A file that exists
// with other content is a conflict: nothing is written unless force.
// Files of dir the plugin does not have are left alone.
func InstallClaude(dir, aot string, force bool) ([]File, error) {
	files, err := ClaudePlugin(aot)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("%s exists and is not a directory", dir)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	actions := map[string]string{}
	var conflicts []string
	for _, name := range names {
		old, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			actions[name] = Written
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", name, err)
		case bytes.Equal(old, files[name]):
			actions[name] = Unchanged
		default:
			actions[name] = Replaced
			conflicts = append(conflicts, name)
		}
	}
	if len(conflicts) > 0 && !force {
		return nil, &ConflictError{Dir: dir, Files: conflicts}
	}
	out := make([]File, 0, len(names))
	for _, name := range names {
		if actions[name] != Unchanged {
			if err := writeFile(filepath.Join(dir, filepath.FromSlash(name)), files[name]); err != nil {
				return nil, err
			}
		}
		out = append(out, File{Path: path.Clean(name), Action: actions[name]})
	}
	return out, nil
}

// InstallCodex merges aot's hooks into dir/hooks.json (dir is $CODEX_HOME):
// hooks of aot from an earlier install are replaced, everything else is kept.
func InstallCodex(dir, aot string) (File, error) {
	return mergeInto(filepath.Join(dir, "hooks.json"), aot, "codex", codexHooks)
}

// InstallGemini merges aot's hooks into dir/settings.json (dir is ~/.gemini
// or a project's .gemini): the person's other settings and hooks are kept.
func InstallGemini(dir, aot string) (File, error) {
	return mergeInto(filepath.Join(dir, "settings.json"), aot, "gemini", geminiHooks)
}

func mergeInto(file, aot, client string, bs []binding) (File, error) {
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return File{}, fmt.Errorf("read %s: %w", file, err)
	}
	exists := err == nil
	merged, err := mergeHooks(old, aot, client, bs)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", file, err)
	}
	switch {
	case !exists:
		err = writeFile(file, merged)
		return File{Path: file, Action: Written}, err
	case bytes.Equal(old, merged):
		return File{Path: file, Action: Unchanged}, nil
	default:
		err = writeFile(file, merged)
		return File{Path: file, Action: Updated}, err
	}
}

func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic(err) // plain structs of strings and ints always encode
	}
	return buf.Bytes()
}

// writeFile replaces file atomically: a temporary file beside it, renamed.
func writeFile(file string, data []byte) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up a failure
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}
