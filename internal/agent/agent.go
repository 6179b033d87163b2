// Package agent defines what the engine asks of an agent (a role, an atom and
// only the context that atom needs) and the backends that answer it.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Role is what an agent is asked to do.
type Role string

const (
	Probe    Role = "probe"    // read-only investigation: is the atom feasible?
	Worker   Role = "worker"   // do the atom's work
	Verifier Role = "verifier" // check the base case
	Judge    Role = "judge"    // score a quality or assertion check
	Planner  Role = "planner"  // propose new atoms or decompositions
	Align    Role = "align"    // propose an objective and first atoms from a request (aot align)
)

// Roles lists every role, in the order aot status shows them.
var Roles = []Role{Probe, Worker, Verifier, Judge, Planner, Align}

// AtomRef is the atom a task is about.
type AtomRef struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	DependsOn   []string `json:"depends_on"`
	ORGroup     string   `json:"or_group,omitempty"`
}

// Objective is the part of the objective every agent sees.
type Objective struct {
	Goal             string `json:"goal"`
	BackgroundIntent string `json:"background_intent,omitempty"`
	Deliverables     string `json:"deliverables,omitempty"`
	DefinitionOfDone string `json:"definition_of_done,omitempty"`
}

// Binding is a resolved dependency's contracted result.
type Binding struct {
	Summary   string   `json:"summary"`
	Artifacts []string `json:"artifacts"`
}

// Task is everything an agent gets: the atom, the objective and the bindings
// of the atom's dependencies only, so its size does not grow with the DAG.
type Task struct {
	Role      Role               `json:"role"`
	Atom      AtomRef            `json:"atom"`
	Objective Objective          `json:"objective"`
	Bindings  map[string]Binding `json:"bindings"`
	Workdir   string             `json:"workdir"`
	Attempt   int                `json:"attempt"`
	StateFile string             `json:"state_file,omitempty"`
	// LastFailure tells a retry why the previous attempt failed.
	LastFailure string `json:"last_failure,omitempty"`
	// Check is the check a judge scores.
	Check any `json:"check,omitempty"`
	// Failures are what verification found missing, for the planner.
	Failures []string `json:"failures,omitempty"`
	// Request is what the person asked for (align), and the answers given
	// so far when a dialogue asks again.
	Request string `json:"request,omitempty"`
	// Files are the files in a judged check's scope, relative to Workdir.
	Files []string `json:"files,omitempty"`
}

// Usage is what an attempt consumed, as the agent reports it.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	// Known says the usage was reported (by the usage file or the answer's
	// "usage" key), as opposed to zero because nobody said.
	Known bool `json:"-"`
	// Refused notes the reported numbers that were not counted (negative,
	// not finite, not whole) and the counts taken as the maximum, one note
	// per field, separated by "; ". A string, so that a Usage compares.
	Refused string `json:"refused,omitempty"`
}

// PlannedAtom is a new atom proposed by a planner.
type PlannedAtom struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	DependsOn   []string `json:"depends_on"`
	ORGroup     string   `json:"or_group,omitempty"`
}

// PlannedDecomposition splits an atom into new children.
type PlannedDecomposition struct {
	Parent   string        `json:"parent"`
	Children []PlannedAtom `json:"children"`
	Reason   string        `json:"reason"`
}

// Result is a role's answer. Which fields matter depends on the role.
type Result struct {
	Success   bool     `json:"success"`
	Summary   string   `json:"summary,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`

	Feasible     bool   `json:"feasible"`
	Findings     string `json:"findings,omitempty"`
	CostEstimate any    `json:"cost_estimate,omitempty"`

	Passed   bool     `json:"passed"`
	Evidence string   `json:"evidence,omitempty"`
	Failures []string `json:"failures,omitempty"`
	Score    float64  `json:"score,omitempty"`

	// Scores are a judge's per-criterion scores of a quality check.
	Scores []Score `json:"scores,omitempty"`

	Atoms          []PlannedAtom          `json:"atoms,omitempty"`
	Decompositions []PlannedDecomposition `json:"decompositions,omitempty"`

	Usage Usage `json:"usage"`

	// UsageLimit says the agent's provider refused for quota or rate limits:
	// not the atom's failure; the loop stops instead of burning attempts.
	UsageLimit bool `json:"usage_limit,omitempty"`
	// RetryAt is when the provider said the quota resets (RFC 3339), with
	// UsageLimit: the loop waits until then instead of stopping.
	RetryAt string `json:"retry_at,omitempty"`

	// Raw is the answer object as the agent gave it, for roles whose fields
	// are not above (align).
	Raw json.RawMessage `json:"-"`
	// Activity counts the tool calls the agent made (CLI backends).
	ToolCalls int `json:"-"`
	// Denials are the tool calls the agent's CLI refused, whatever the
	// agent then said about its work. Only a backend sets them (Decode
	// ignores an answer's own); they travel with the result (Temporal).
	Denials []Denial `json:"denials,omitempty"`
}

// Denial is one tool call an agent's CLI refused to run.
type Denial struct {
	Tool string `json:"tool"`           // "Write", "Bash", "apply_patch"
	Path string `json:"path,omitempty"` // the file or the command it was refused for
	Why  string `json:"why,omitempty"`  // the CLI's words, one line
}

// String is the refusal in one line: "Write ../out.txt".
func (d Denial) String() string {
	if d.Path == "" {
		return d.Tool
	}
	return d.Tool + " " + d.Path
}

// Score is one criterion's score by a judge.
type Score struct {
	Criterion string  `json:"criterion"`
	Score     float64 `json:"score"`
	Rationale string  `json:"rationale,omitempty"`
}

// OK reports whether the result counts as a success for its role.
func (r Result) OK(role Role) bool {
	switch role {
	case Worker:
		return r.Success
	case Probe:
		return r.Feasible
	case Verifier, Judge:
		return r.Passed
	case Planner:
		return len(r.Atoms)+len(r.Decompositions) > 0
	}
	return false
}

// Agent answers tasks. An error means the attempt failed (crash, timeout,
// garbage output); a Result with OK false means the agent itself said no.
type Agent interface {
	Run(ctx context.Context, t Task) (Result, error)
}

// Kind classifies why an attempt failed. Each kind has its own reason text
// in the journal and aot status; none is ever taken for success.
type Kind string

const (
	KindCrash      Kind = "crash"             // the agent exited non-zero or could not run
	KindTimeout    Kind = "timeout"           // its deadline passed; its process tree was killed
	KindMalformed  Kind = "malformed_answer"  // no final answer, or not the role's answer format
	KindPermission Kind = "permission_denied" // a tool the task needed was refused
	KindRateLimit  Kind = "rate_limited"      // HTTP 429, 503 or 529: try later, not the atom's fault
	KindCancelled  Kind = "cancelled"         // stopped by the engine
	KindAgent      Kind = "agent_error"       // the agent reported an error of its own
	// KindNoChange: a worker said it succeeded but its attempt changed no
	// file, or none of the files it claimed (an atom with expect_changes:
	// false may change nothing).
	KindNoChange Kind = "no_change"
)

// AttemptError is a failed attempt with its reason.
type AttemptError struct {
	Reason string
	Usage  Usage
	// Kind classifies the failure; empty is a crash-like failure of the
	// exec backend, which says no more.
	Kind Kind
	// RetryAfter is how long the provider asked to wait (rate limits).
	RetryAfter time.Duration
}

// Transient reports whether err is a rate limit or overload: the attempt
// is retried later without charging the atom.
func Transient(err error) (*AttemptError, bool) {
	var ae *AttemptError
	if errors.As(err, &ae) && ae.Kind == KindRateLimit {
		return ae, true
	}
	return nil, false
}

func (e *AttemptError) Error() string { return e.Reason }

// requiredKey is the key a role's answer must carry.
var requiredKey = map[Role]string{Worker: "success", Probe: "feasible", Verifier: "passed", Judge: "passed"}

// Decode reads a role's answer: exactly one JSON object carrying the role's
// key with the right type.
func Decode(role Role, data []byte) (Result, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Result{}, fmt.Errorf("the answer is not one JSON object: %w", err)
	}
	if v, ok := raw["usage_limit"]; ok && string(v) == "true" {
		var r Result
		if err := json.Unmarshal(data, &r); err != nil {
			return Result{}, fmt.Errorf("the %s answer has a field of the wrong type: %w", role, err)
		}
		r.Usage.Known = hasUsage(raw)
		r.Denials = nil
		return r, nil
	}
	if key, ok := requiredKey[role]; ok {
		v, present := raw[key]
		if !present {
			return Result{}, fmt.Errorf("the %s answer has no %q key", role, key)
		}
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return Result{}, fmt.Errorf("the %s answer's %q must be true or false", role, key)
		}
	}
	if role == Planner {
		if _, a := raw["atoms"]; !a {
			if _, d := raw["decompositions"]; !d {
				return Result{}, errors.New(`the planner answer has neither "atoms" nor "decompositions"`)
			}
		}
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return Result{}, fmt.Errorf("the %s answer has a field of the wrong type: %w", role, err)
	}
	r.Usage.Known = hasUsage(raw)
	r.Raw = append(json.RawMessage(nil), data...)
	r.Denials = nil // the CLI's word, not the agent's
	return r, nil
}
