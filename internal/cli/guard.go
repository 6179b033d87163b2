package cli

import (
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/confine"
)

// newCmdAgentGuard is the guard every agent attempt of aot run starts
// under (package confine): not a command for people.
func newCmdAgentGuard() *cobra.Command {
	return &cobra.Command{
		Use:                confine.Command + " [--landlock] [--rw PATH]... -- COMMAND...",
		Short:              "Run an agent attempt confined, and kill it when the engine dies (used by aot run)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := confine.Main(args); code != 0 {
				return reported(code)
			}
			return nil
		},
	}
}

// guardFor returns the guard aot run (and aot worker) starts agents under,
// for the --confine mode: this very binary (on Linux through
// /proc/self/exe, which still runs it if the file was replaced meanwhile),
// self being how it was started.
func guardFor(self, mode string) *confine.Guard {
	exe := self
	if runtime.GOOS == "linux" {
		if _, err := os.Stat("/proc/self/exe"); err == nil {
			exe = "/proc/self/exe"
		}
	}
	return confine.New(mode, exe)
}
