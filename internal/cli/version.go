package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

type versionDoc struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}

func newCmdVersion(d *deps, g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the aot version",
		Long:  "Print the aot version. JSON: {version, go}.",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return printVersion(d, g)
		}),
	}
}

// printVersion is aot version, and aot --version.
func printVersion(d *deps, g *globalOptions) error {
	v := versionDoc{Version: d.version, Go: runtime.Version()}
	if g.JSON {
		writeJSON(d.io.Out, v)
		return nil
	}
	fmt.Fprintf(d.io.Out, "aot %s (%s)\n", v.Version, v.Go)
	return nil
}
