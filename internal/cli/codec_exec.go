//go:build !temporal

package cli

import "github.com/spf13/cobra"

// newCmdCodecServer is aot codec-server, handed over to aot-temporal
// (codec.go): the codec is the Temporal SDK's.
func newCmdCodecServer(d *deps, g *globalOptions, runF func(*codecOptions) error) *cobra.Command {
	return &cobra.Command{
		Use:                "codec-server [flags]",
		Short:              "Decode aot's payloads for the Temporal UI and CLI (--codec-endpoint) (aot-temporal)",
		DisableFlagParsing: true,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return handOver(commandLine(cmd, args), d.io)
		}),
	}
}

type codecOptions struct{}
