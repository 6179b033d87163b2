package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/journal"
)

func newCmdTop(d *deps, g *globalOptions, runF func(*statusOptions) error) *cobra.Command {
	opts := &statusOptions{IO: d.io, Global: g, now: d.now, Watch: true}
	return opts.command("top [--interval D]", "The live view of the loop (aot status --watch)",
		"aot top is aot status --watch: the loop's live view, redrawn as it changes,\nuntil q or Ctrl-C.\n\n"+statusLong, 50, runF)
}

// fileStamp is what a cheap look at a file sees: a change of either means
// the file changed.
type fileStamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		// An empty file shows what a missing one does: a journal's first
		// append creates the file, then writes, and a look between the two
		// must not count as a change of its own.
		return fileStamp{size: -1}
	}
	return fileStamp{fi.Size(), fi.ModTime()}
}

// loopStamp is the state file's and the journal's stamps.
type loopStamp struct{ state, journal fileStamp }

func stampLoop(stateFile string) loopStamp {
	return loopStamp{stampOf(stateFile), stampOf(journal.PathFor(stateFile))}
}

// watchRun is aot status --watch and aot top: the full-screen view on a
// terminal, else a status block printed on every change.
func watchRun(ctx context.Context, opts *statusOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	if opts.IO.tty {
		return topRun(ctx, opts)
	}
	return watchPlain(ctx, opts)
}

// watchPlain prints the status block, then again each time the state file
// or the journal changes, until ctx ends.
func watchPlain(ctx context.Context, opts *statusOptions) error {
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	var last loopStamp
	for first := true; ; first = false {
		if now := stampLoop(opts.Global.StateFile); first || now != last {
			last = now
			v, err := gatherStatus(opts.IO, opts.Global, opts.Events)
			if err != nil {
				return err
			}
			if !first {
				fmt.Fprintf(opts.IO.Out, "\n--- %s\n", opts.now().Format("15:04:05"))
			}
			writeStatus(opts.IO, v)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
