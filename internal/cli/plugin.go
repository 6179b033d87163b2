package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/plugin"
)

type pluginInstallOptions struct {
	IO     *streams
	Global *globalOptions
	// Dir is the Claude Code plugin's directory; "" when only --codex or
	// --gemini were asked for.
	Dir    string
	Codex  string
	Gemini string
	Aot    string // the aot the hooks run: "aot" from PATH, or an absolute path
	Force  bool
}

const pluginInstallLong = `Write the AoT Loop plugin for Claude Code into DIR (default
.claude/plugins/aot-loop), from files built into aot:

  .claude-plugin/plugin.json   the manifest (plugin aot-loop)
  hooks/hooks.json             Stop and SubagentStop run "aot hook claude stop" and
                               "aot hook claude subagent-stop", PreToolUse runs
                               "aot hook claude pre-tool-use"
  commands/*.md                /align-goal, /enter-recursion, /exit-recursion,
                               /redirect, /loop-status, each calling aot
  agents/*.md                  probe (read-only), worker, verifier
  skills/aot-state/SKILL.md    aot's state commands, for the model

Load it with: claude --plugin-dir DIR. A file of DIR that already exists with
other content (another plugin, an older version, an edit) is refused unless
--force replaces it; other files of DIR are left alone.

--codex DIR merges the hooks of Codex into DIR/hooks.json (DIR is
$CODEX_HOME, by default ~/.codex): Stop and PreToolUse run "aot hook codex
stop|pre-tool-use". Codex runs hooks only once they are trusted (codex exec
--dangerously-bypass-hook-trust, or trust them in Codex). --gemini DIR merges
the hooks of Gemini CLI into DIR/settings.json (DIR is ~/.gemini or a
project's .gemini): AfterAgent and BeforeTool run "aot hook gemini
after-agent|before-tool". Both keep every other setting and hook; installing
again replaces only aot's own hooks. With --codex or --gemini and no DIR,
the Claude Code plugin is not written.

The hooks run "aot-hook" when it is on PATH at install time, or by its path
when it sits beside the aot that installs (make build builds both: the same
answers as aot hook, a faster start, which matters since PreToolUse runs on
every tool call), else "aot hook"; --aot-bin PATH names another aot or
aot-hook binary.

JSON: {success, claude?: {dir, files: [{path, action}]}, codex?: {path,
action}, gemini?: {path, action}, notes: [sentence]}; action is written,
replaced, updated or unchanged.`

func newCmdPlugin(d *deps, g *globalOptions) *cobra.Command {
	cmd := newGroupCmd("plugin", "Install the Claude Code plugin and the hooks of Codex and Gemini CLI")
	cmd.AddCommand(newCmdPluginInstall(d, g, nil))
	return cmd
}

func newCmdPluginInstall(d *deps, g *globalOptions, runF func(*pluginInstallOptions) error) *cobra.Command {
	opts := &pluginInstallOptions{IO: d.io, Global: g}
	var aotBin string
	cmd := &cobra.Command{
		Use:   "install [DIR] [--codex DIR] [--gemini DIR] [--force] [--aot-bin PATH]",
		Short: "Write the Claude Code plugin (and Codex or Gemini CLI hooks) that run the loop through aot",
		Long:  pluginInstallLong,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("unexpected argument %q", args[1])
			}
			return nil
		},
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1:
				opts.Dir = args[0]
			case opts.Codex == "" && opts.Gemini == "":
				opts.Dir = plugin.DefaultDir
			}
			if opts.Dir == "" && flagChanged(cmd.Flags(), "force") {
				return usagef("--force applies to the Claude Code plugin's DIR only")
			}
			aot, err := resolveAotBin(aotBin, os.Executable)
			if err != nil {
				return err
			}
			opts.Aot = aot
			if runF != nil {
				return runF(opts)
			}
			return pluginInstallRun(opts)
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Codex, "codex", "", "also write Codex's hooks into `DIR`/hooks.json ($CODEX_HOME)")
	fs.StringVar(&opts.Gemini, "gemini", "", "also write Gemini CLI's hooks into `DIR`/settings.json (~/.gemini)")
	fs.BoolVar(&opts.Force, "force", false, "replace plugin files that differ")
	fs.StringVar(&aotBin, "aot-bin", "", "the aot (or aot-hook) binary the hooks run: a name on PATH or a `path` (default: aot-hook if on PATH, else aot)")
	return cmd
}

// resolveAotBin keeps a bare name (looked up on PATH when a hook runs) and
// makes a path absolute, since hooks run in whatever directory the session
// is in. A path must name an executable file.
func resolveAotBin(bin string, executable func() (string, error)) (string, error) {
	if bin == "" {
		if _, err := exec.LookPath("aot-hook"); err == nil {
			return "aot-hook", nil
		}
		// make build puts aot-hook beside aot: use it by its path.
		if exe, err := executable(); err == nil {
			beside := filepath.Join(filepath.Dir(exe), "aot-hook")
			if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return beside, nil
			}
		}
		return "aot", nil
	}
	if strings.TrimSpace(bin) == "" {
		return "", usagef("--aot-bin is empty")
	}
	if !strings.ContainsRune(bin, filepath.Separator) && !strings.ContainsRune(bin, '/') {
		return bin, nil
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", fmt.Errorf("--aot-bin %s: %w", bin, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("--aot-bin %s: %w", bin, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("--aot-bin %s: not an executable file", bin)
	}
	return abs, nil
}

type pluginClaudeDoc struct {
	Dir   string        `json:"dir"`
	Files []plugin.File `json:"files"`
}

type pluginInstallDoc struct {
	Success bool             `json:"success"`
	Claude  *pluginClaudeDoc `json:"claude,omitempty"`
	Codex   *plugin.File     `json:"codex,omitempty"`
	Gemini  *plugin.File     `json:"gemini,omitempty"`
	Notes   []string         `json:"notes"`
}

func pluginInstallRun(opts *pluginInstallOptions) error {
	doc := pluginInstallDoc{Success: true, Notes: []string{}}
	if opts.Aot == "aot" {
		doc.Notes = append(doc.Notes, "the hooks, commands and skill run aot from PATH: keep it there for every session")
	} else {
		doc.Notes = append(doc.Notes, "the hooks run "+opts.Aot+"; the commands and skill run aot from PATH")
	}
	if opts.Dir != "" {
		files, err := plugin.InstallClaude(opts.Dir, opts.Aot, opts.Force)
		var ce *plugin.ConflictError
		if errors.As(err, &ce) {
			return fmt.Errorf("%w (aot plugin install --force %s)", err, opts.Dir)
		}
		if err != nil {
			return err
		}
		doc.Claude = &pluginClaudeDoc{Dir: opts.Dir, Files: files}
		doc.Notes = append(doc.Notes, "load the plugin with: claude --plugin-dir "+opts.Dir)
	}
	if opts.Codex != "" {
		f, err := plugin.InstallCodex(opts.Codex, opts.Aot)
		if err != nil {
			return err
		}
		doc.Codex = &f
		doc.Notes = append(doc.Notes, "Codex runs hooks only once trusted: run codex exec with --dangerously-bypass-hook-trust, or trust the hooks in Codex; CODEX_HOME must be "+opts.Codex)
	}
	if opts.Gemini != "" {
		f, err := plugin.InstallGemini(opts.Gemini, opts.Aot)
		if err != nil {
			return err
		}
		doc.Gemini = &f
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, doc)
		return nil
	}
	w := opts.IO.Out
	if doc.Claude != nil {
		fmt.Fprintf(w, "Claude Code plugin in %s:\n", doc.Claude.Dir)
		for _, f := range doc.Claude.Files {
			fmt.Fprintf(w, "  %-9s  %s\n", f.Action, f.Path)
		}
	}
	if doc.Codex != nil {
		fmt.Fprintf(w, "Codex hooks: %s %s\n", doc.Codex.Action, doc.Codex.Path)
	}
	if doc.Gemini != nil {
		fmt.Fprintf(w, "Gemini CLI hooks: %s %s\n", doc.Gemini.Action, doc.Gemini.Path)
	}
	for _, n := range doc.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	return nil
}
