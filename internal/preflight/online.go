package preflight

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/backend"
)

// onlinePrompt is the one request --online sends: a few tokens.
const onlinePrompt = "Reply with the single word ok."

// onlineTimeout bounds that request, the CLI's own retries included.
const onlineTimeout = 90 * time.Second

// Online sends one tiny request through each CLI the roles run (claude,
// codex, gemini), as aot would run it headless in an empty folder, and
// says whether the model answered: the login, the endpoint and the model
// name all checked at once (with the model of the first role on that CLI).
// A CLI that is not found is left to Programs.
func Online(ctx context.Context, cfg backend.Config, roles []agent.Role, env Env) []Check {
	var list []use
	for _, u := range uses(cfg, roles) {
		if _, known := cliOf[u.spec.Agent]; known {
			list = append(list, u)
		}
	}
	out := make([]Check, len(list))
	var wg sync.WaitGroup
	for i, u := range list {
		name := u.spec.Agent + " request"
		path := u.program
		if !strings.ContainsRune(path, '/') {
			p, err := env.lookPath(path)
			if err != nil {
				out[i] = warn(name, "not sent: "+path+" is not found", "see the "+u.spec.Agent+" line")
				continue
			}
			path = p
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if err := ask(ctx, u.spec.Agent, path, u.spec.Model); err != nil {
				out[i] = fail(name, "one request failed: "+err.Error(), "fix the login (the "+u.spec.Agent+" login line), the model name or the endpoint, then try `aot doctor --online` again")
				return
			}
			model := ""
			if u.spec.Model != "" {
				model = " (model " + u.spec.Model + ")"
			}
			out[i] = ok(name, fmt.Sprintf("the model answered one request%s in %s", model, time.Since(start).Round(100*time.Millisecond)))
		}()
	}
	wg.Wait()
	return out
}

// ask runs one headless request through the CLI at path.
func ask(ctx context.Context, name, path, model string) error {
	ctx, cancel := context.WithTimeout(ctx, onlineTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "aot-doctor-online-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var args []string
	switch name {
	case "claude":
		args = []string{"-p", "--output-format", "json", "--max-turns", "1"}
	case "codex":
		args = []string{"exec", "--json", "--skip-git-repo-check", "--color", "never", "--sandbox", "read-only", "-c", `approval_policy="never"`}
	case "gemini":
		args = []string{"-p", "", "--output-format", "json", "--skip-trust"}
	}
	if model != "" {
		args = append(args, "--model", model)
	}
	if name == "codex" {
		args = append(args, "-")
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(onlinePrompt)
	if name == "claude" && os.Getenv("CLAUDE_CODE_MAX_RETRIES") == "" {
		// Claude Code retries a refused key for minutes by default.
		cmd.Env = append(os.Environ(), "CLAUDE_CODE_MAX_RETRIES=1")
	}
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("no answer within %s", onlineTimeout)
	}
	msg := answerError(name, stdout.Bytes())
	if m := errorInLog().FindSubmatch(stderr.Bytes()); msg == "" && m != nil {
		msg = string(m[1]) // Gemini CLI prints the API's error on stderr
	}
	switch {
	case msg != "":
		return errors.New(msg)
	case err != nil:
		if line := lastLine(stderr.String()); line != "" {
			return fmt.Errorf("%v: %s", err, line)
		}
		return err
	}
	return nil
}

// errorInLog is an API error object's message in a CLI's stderr, compiled
// on first use.
var errorInLog = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`"error":\s*\{[^{}]*?"message":\s*"((?:[^"\\]|\\.)*)"`)
})

// answerError is the error a CLI's JSON output reports, "" when none.
func answerError(name string, out []byte) string {
	switch name {
	case "claude":
		var r struct {
			IsError bool   `json:"is_error"`
			Result  string `json:"result"`
		}
		if json.Unmarshal(out, &r) == nil && r.IsError {
			return firstLine(r.Result)
		}
	case "gemini":
		var r struct {
			Error *struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(out, &r) == nil && r.Error != nil {
			return firstLine(r.Error.Message)
		}
	case "codex":
		msg := ""
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Type    string
				Message string
				Error   *struct{ Message string }
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch {
			case ev.Type == "error" && ev.Message != "":
				msg = ev.Message
			case ev.Type == "turn.failed" && ev.Error != nil:
				msg = ev.Error.Message
			}
		}
		return firstLine(msg)
	}
	return ""
}
