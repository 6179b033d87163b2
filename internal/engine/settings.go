package engine

import "time"

// Settings are a run's own choices, as aot run's flags make them: built
// once, and handed whole to whichever driver runs the loop. The local
// engine's Options embed them; the Temporal workflow's input carries them
// (their JSON) and its Core and activities read them there. A new run
// flag belongs here, so that no driver can leave it behind.
type Settings struct {
	// MaxParallel and MaxIterations (> 0) override the state's
	// constraints for this run.
	MaxParallel   int `json:"max_parallel,omitempty"`
	MaxIterations int `json:"max_iterations,omitempty"`
	// AgentTimeout bounds one agent attempt (0: DefaultAgentTimeout).
	AgentTimeout time.Duration `json:"agent_timeout,omitempty"`
	// CheckTimeout bounds each base-case command without a timeout of its
	// own (0: verify.DefaultTimeout).
	CheckTimeout time.Duration `json:"check_timeout,omitempty"`
	// NoWait stops the loop on a usage-limit answer even when the agent
	// said when its quota resets (exit 10), instead of waiting.
	NoWait bool `json:"no_wait,omitempty"`
	// Isolation is how worker attempts are kept apart: IsolationAuto,
	// IsolationWorktree, IsolationNone or IsolationShared (the zero value).
	Isolation string `json:"isolation,omitempty"`
	// KeepFailed keeps a failed attempt's worktree and branch for a look.
	KeepFailed bool `json:"keep_failed,omitempty"`
}

// Isolation modes of Settings.Isolation.
const (
	// IsolationAuto: a worktree per worker attempt in a git repository;
	// elsewhere as IsolationNone. The CLI's default.
	IsolationAuto = "auto"
	// IsolationWorktree: a worktree per worker attempt; not a git
	// repository is an error.
	IsolationWorktree = "worktree"
	// IsolationNone: every agent in the project root, one worker at a time,
	// so two agents never write the same files at once.
	IsolationNone = "none"
	// IsolationShared: every agent in the project root, in parallel: for
	// agents that write nothing, or files the person knows to be disjoint.
	// The zero value of Settings.Isolation, for programs that embed the
	// engine with in-process agents.
	IsolationShared = "shared"
)
