package cli

import (
	"github.com/spf13/pflag"

	"github.com/aot-loop/aot/internal/engine"
)

// engineFlags refuses a flag the chosen engine cannot honour. Every other
// aot run flag reaches either engine: the run's settings (engine.Settings)
// are handed whole to the local engine or carried in the Temporal
// workflow's input, so that neither leaves one behind.
func engineFlags(f *pflag.FlagSet, opts *runOptions) error {
	switch opts.Engine {
	case engineTemporal:
		switch {
		case opts.Detach:
			return usagef("--detach starts the local engine; a Temporal workflow (--engine temporal) runs without aot run already")
		case opts.KeepFailed:
			return usagef("--keep-failed keeps failed attempts' worktrees on this machine; on Temporal each attempt runs in a worker's scratch checkout, removed when it ends: run locally to keep them")
		case opts.Isolation != engine.IsolationAuto && opts.Isolation != engine.IsolationWorktree:
			return usagef("--isolation %s: on Temporal every attempt runs in a worktree of its own on a worker (auto or worktree); none and shared are for local runs", opts.Isolation)
		case f.Changed("worktree-dir"):
			return usagef("--worktree-dir is where a local run keeps its worktrees; on Temporal the workers keep theirs in their cache folder (aot worker --cache)")
		case f.Changed("confine"):
			return usagef("--confine is a local run's choice; on Temporal each worker confines the agents it runs")
		}
	case engineLocal, "":
		for _, name := range []string{"attach", "task-queue", "remote"} {
			if f.Changed(name) {
				return usagef("--%s is for a Temporal workflow: use it with --engine temporal", name)
			}
		}
	default:
		return usagef("--engine %q: choose local or temporal", opts.Engine)
	}
	return nil
}
