// Package hooks makes the decisions of `aot hook CLIENT EVENT`: the answers
// AoT Loop gives to the hooks of Claude Code, Codex and Gemini CLI.
//
// Two kinds of hook exist. The continuation hook (Claude Code Stop and
// SubagentStop, Codex Stop, Gemini AfterAgent) keeps the session that owns a
// running loop working on it: it does the loop's bookkeeping through the
// store (iteration, stall count, bounds) and runs the base case itself when
// no atom is left. The tool hook (Claude Code and Codex PreToolUse, Gemini
// BeforeTool) may approve a tool call without asking the person, and is
// built to fail closed: it approves only tools of the loop's own session,
// within that session's role, while the loop is running and its state file
// validates. Every other case, errors included, is "no decision": the client
// goes on as if no hook existed (the session may stop; the person is asked).
package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// Client is an agent CLI whose hooks aot answers.
type Client string

// The clients.
const (
	Claude Client = "claude"
	Codex  Client = "codex"
	Gemini Client = "gemini"
)

// Event is a hook of a client, named as on aot's command line.
type Event string

// The events, per client: see Events.
const (
	Stop         Event = "stop"          // claude, codex
	SubagentStop Event = "subagent-stop" // claude
	PreToolUse   Event = "pre-tool-use"  // claude, codex
	AfterAgent   Event = "after-agent"   // gemini
	BeforeTool   Event = "before-tool"   // gemini
)

// Events lists the events each client has.
var Events = map[Client][]Event{
	Claude: {SubagentStop, Stop, PreToolUse},
	Codex:  {Stop, PreToolUse},
	Gemini: {AfterAgent, BeforeTool},
}

// continuation reports whether ev is a continuation hook (else a tool hook).
func continuation(ev Event) bool { return ev == Stop || ev == SubagentStop || ev == AfterAgent }

// Input is the part of a client's hook JSON that aot reads. The three
// clients share these names (recorded payloads: Claude Code 2.1.330, Codex
// 0.169.0, Gemini CLI 0.61.0).
type Input struct {
	SessionID      string          `json:"session_id"`
	Cwd            string          `json:"cwd"`
	HookEventName  string          `json:"hook_event_name"`
	StopHookActive bool            `json:"stop_hook_active"`
	AgentID        string          `json:"agent_id"`   // set inside a subagent (Claude, Codex)
	AgentType      string          `json:"agent_type"` // the subagent's type, e.g. "aot-loop:probe"
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	TranscriptPath string          `json:"transcript_path"` // the session's transcript (Claude Code)
}

// maxInput bounds what is read from stdin: a Write of a large file carries
// the whole content in tool_input.
const maxInput = 64 << 20

// ParseInput reads a hook's JSON.
func ParseInput(r io.Reader) (Input, error) {
	var in Input
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return in, fmt.Errorf("read the hook's input: %w", err)
	}
	if len(data) > maxInput {
		return in, fmt.Errorf("the hook's input is larger than %d MiB", maxInput>>20)
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return in, fmt.Errorf("the hook's input is not a JSON object: %w", err)
	}
	return in, nil
}

// Action is what a decision does.
type Action int

// The actions.
const (
	None  Action = iota // no decision: print nothing
	Block               // keep the session going with Reason as its next instruction
	End                 // let the session end, telling the person Message
	Allow               // approve the tool call without asking the person
)

// Decision is a hook's answer, before it is put in a client's format.
type Decision struct {
	Action  Action
	Reason  string // Block: the instruction to the model; Allow: why it was approved
	Message string // shown to the person (Block and End)
}

// Options configure Decide.
type Options struct {
	Client Client
	Event  Event
	// StateFile is the state file named by --state-file or AOT_STATE_FILE
	// ("" to find it from the hook's cwd as aot finds it from a directory). A
	// relative path is taken from the hook's cwd.
	StateFile string
	Getenv    func(string) string
	Getwd     func() (string, error)
	Now       func() time.Time
	// Guard is called before the base case runs and done after it ended
	// by itself (see Answer); nil runs the check without a guard.
	Guard func() (done func(), err error)
	// Verify runs the base case; nil runs verify.BaseCase without a judge.
	Verify func(ctx context.Context, bc *state.BaseCase, dir string) (verify.Report, error)
}

func (o *Options) getenv(k string) string {
	if o.Getenv == nil {
		return ""
	}
	return o.Getenv(k)
}

func (o *Options) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

// Decide answers one hook. A returned error means no decision: the caller
// reports it on stderr and prints nothing.
func Decide(ctx context.Context, opts Options, in Input) (Decision, error) {
	if !validEvent(opts.Client, opts.Event) {
		return Decision{}, fmt.Errorf("%s has no %s hook", opts.Client, opts.Event)
	}
	// An agent started by aot's own engine (aot run, the delegated mode)
	// carries AOT_ROLE; the engine bounds it, so its hooks stay out.
	if opts.getenv("AOT_ROLE") != "" {
		return Decision{}, nil
	}
	if continuation(opts.Event) {
		return decideContinue(ctx, &opts, in)
	}
	return decideTool(&opts, in)
}

func validEvent(c Client, ev Event) bool {
	for _, e := range Events[c] {
		if e == ev {
			return true
		}
	}
	return false
}

// Render puts d in the client's format for the event: the bytes to print on
// stdout, nil for no decision.
func Render(c Client, ev Event, d Decision) []byte {
	var v any
	switch d.Action {
	case None:
		return nil
	case Block:
		if !continuation(ev) {
			return nil
		}
		doc := map[string]string{"decision": "block", "reason": d.Reason}
		if c == Claude && d.Message != "" {
			doc["systemMessage"] = d.Message
		}
		v = doc
	case End:
		if !continuation(ev) || d.Message == "" {
			return nil
		}
		v = map[string]string{"systemMessage": d.Message}
	case Allow:
		switch {
		case continuation(ev):
			return nil
		case c == Claude:
			v = map[string]any{"hookSpecificOutput": map[string]string{
				"hookEventName": "PreToolUse", "permissionDecision": "allow", "permissionDecisionReason": d.Reason}}
		case c == Gemini:
			v = map[string]string{"decision": "allow", "reason": d.Reason}
		default:
			// Codex 0.169 refuses permissionDecision "allow" from PreToolUse
			// ("unsupported permissionDecision:allow"): approvals there come
			// from its own approval policy, so aot gives no decision.
			return nil
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return append(out, '\n')
}
