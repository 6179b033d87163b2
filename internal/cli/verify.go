package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/verify"
)

type verifyOptions struct {
	IO      *streams
	Global  *globalOptions
	Timeout time.Duration
}

func newCmdVerify(d *deps, g *globalOptions, runF func(*verifyOptions) error) *cobra.Command {
	opts := &verifyOptions{IO: d.io, Global: g}
	var timeout string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Run the base case's checks, or one check",
		Long: `Run every check of the objective's base case, from the project root (the
directory that holds .claude/). Commands run through the shell with a timeout;
on timeout their whole process group is killed. A check's own timeout: field
(whole seconds, or a duration like 10m; aot init --check-timeout writes it)
wins; otherwise --timeout applies, by default 60s. not_command passes only on a
normal non-zero exit: a missing command (126, 127), a timeout or a signal is a
failure. assertion and quality checks need an LLM judge: they are listed
under skipped and the base case does not pass until they are judged.
An empty checklist, group or command is an error, never a pass.

Exit 0 when the base case passed, 1 otherwise.
JSON: {passed, checklist: [{item, type?, passed, evidence, group_results?,
any_of_results?}], skipped: [{item, type, reason}]}.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			t, err := timeoutFlag(timeout)
			if err != nil {
				return err
			}
			opts.Timeout = t
			if runF != nil {
				return runF(opts)
			}
			return verifyRun(cmd.Context(), opts)
		}),
	}
	cmd.Flags().StringVar(&timeout, "timeout", "", "default per-command timeout: seconds or a duration like 2m (default 60s)")
	cmd.AddCommand(newCmdVerifyCommand(d, g, nil), newCmdVerifyFile(d, g, nil))
	return cmd
}

func timeoutFlag(v string) (time.Duration, error) {
	if v == "" {
		return verify.DefaultTimeout, nil
	}
	t, err := verify.ParseTimeout(v)
	if err != nil {
		return 0, usagef("--timeout: %v", err)
	}
	return t, nil
}

func verifyRun(ctx context.Context, opts *verifyOptions) error {
	s, err := readState(opts.Global)
	if err != nil {
		return err
	}
	root, err := opts.Global.projectRoot()
	if err != nil {
		return err
	}
	rep, err := verify.BaseCase(ctx, s.Objective.BaseCase, verify.Options{Dir: root, Timeout: opts.Timeout})
	if err != nil {
		return fmt.Errorf("%s: %w", opts.Global.StateFile, err)
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, rep)
	} else {
		printItems(opts.IO, rep.Checklist, "")
		for _, sk := range rep.Skipped {
			fmt.Fprintf(opts.IO.Out, "%s %s (%s): %s\n", opts.IO.paint(styleYellow, "skipped"), sk.Item, sk.Type, sk.Reason)
		}
		verdict := "passed"
		if !rep.Passed {
			verdict = "failed"
		}
		fmt.Fprintf(opts.IO.Out, "base case %s\n", opts.IO.status(verdict))
	}
	if !rep.Passed {
		return reported(exitFail)
	}
	return nil
}

func printItems(io *streams, items []verify.ItemResult, indent string) {
	for _, it := range items {
		mark := io.paint(styleGreen, "PASS")
		switch {
		case it.NeedsJudge:
			mark = io.paint(styleYellow, "SKIP")
		case !it.Passed:
			mark = io.paint(styleRed, "FAIL")
		}
		line := fmt.Sprintf("%s%s  %s", indent, mark, it.Item)
		if ev := dag.OneLine(it.Evidence, 100); ev != "" && len(it.GroupResults) == 0 && len(it.AnyOfResults) == 0 {
			line += io.paint(styleDim, "  "+ev)
		}
		fmt.Fprintln(io.Out, line)
		printItems(io, it.GroupResults, indent+"  ")
		if len(it.AnyOfResults) > 0 {
			printItems(io, it.AnyOfResults, indent+"  | ")
		}
	}
}

// --- aot verify command ---

type verifyCommandOptions struct {
	IO         *streams
	Global     *globalOptions
	Command    string
	ExpectFail bool
	Timeout    time.Duration
}

func newCmdVerifyCommand(d *deps, g *globalOptions, runF func(*verifyCommandOptions) error) *cobra.Command {
	opts := &verifyCommandOptions{IO: d.io, Global: g}
	var timeout string
	cmd := &cobra.Command{
		Use:   "command CMD [--expect-fail] [--timeout D]",
		Short: "Run one shell command as a check",
		Long: `Run CMD through the shell in the current directory. It passes on exit 0;
with --expect-fail (a not_command check) it passes only on a normal non-zero
exit that is not 126 or 127. On timeout the whole process group is killed and
the check fails. The tail of the output is kept as evidence.

JSON: {passed, type: command|not_command, command, exit_code, evidence,
output_summary}; exit_code is null when the command was killed.`,
		Args: exactArgs("CMD"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.Command = args[0]
			if strings.TrimSpace(opts.Command) == "" {
				return usagef("CMD must not be empty")
			}
			t, err := timeoutFlag(timeout)
			if err != nil {
				return err
			}
			opts.Timeout = t
			if runF != nil {
				return runF(opts)
			}
			return verifyCommandRun(cmd.Context(), opts)
		}),
	}
	cmd.Flags().BoolVar(&opts.ExpectFail, "expect-fail", false, "pass when the command fails (not_command)")
	cmd.Flags().StringVar(&timeout, "timeout", "", "seconds or a duration like 2m (default 60s)")
	return cmd
}

func verifyCommandRun(ctx context.Context, opts *verifyCommandOptions) error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	res := verify.Command(ctx, dir, opts.Command, opts.ExpectFail, opts.Timeout)
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, res)
	} else {
		printVerdict(opts.IO, res.Passed, res.Type, res.Evidence)
		if tail := strings.TrimSpace(res.OutputSummary); tail != "" && !res.Passed {
			fmt.Fprintln(opts.IO.Out, tail)
		}
	}
	if !res.Passed {
		return reported(exitFail)
	}
	return nil
}

func printVerdict(io *streams, passed bool, typ, evidence string) {
	v := "passed"
	if !passed {
		v = "failed"
	}
	fmt.Fprintf(io.Out, "%s %s: %s\n", typ, io.status(v), evidence)
}

// --- aot verify file ---

type verifyFileOptions struct {
	IO            *streams
	Global        *globalOptions
	Path          string
	ExpectMissing bool
}

func newCmdVerifyFile(d *deps, g *globalOptions, runF func(*verifyFileOptions) error) *cobra.Command {
	opts := &verifyFileOptions{IO: d.io, Global: g}
	cmd := &cobra.Command{
		Use:   "file PATH [--expect-missing]",
		Short: "Check that a file (or glob) exists, or is missing",
		Long: `Check that PATH exists, relative to the current directory. PATH may be a
glob: * and ? match within a name (dotfiles included), ** matches any depth.
With --expect-missing (a not_file check) it passes when nothing matches.

JSON: {passed, type: file|not_file, path, exists, evidence}.`,
		Args: exactArgs("PATH"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			if strings.TrimSpace(opts.Path) == "" {
				return usagef("PATH must not be empty")
			}
			if runF != nil {
				return runF(opts)
			}
			return verifyFileRun(opts)
		}),
	}
	cmd.Flags().BoolVar(&opts.ExpectMissing, "expect-missing", false, "pass when nothing matches (not_file)")
	return cmd
}

func verifyFileRun(opts *verifyFileOptions) error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	res := verify.File(dir, opts.Path, opts.ExpectMissing)
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, res)
	} else {
		printVerdict(opts.IO, res.Passed, res.Type, res.Evidence)
	}
	if !res.Passed {
		return reported(exitFail)
	}
	return nil
}
