package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/aot-loop/aot/internal/brief"
	"github.com/aot-loop/aot/internal/server"
)

type serveOptions struct {
	IO         *streams
	Global     *globalOptions
	Addr       string
	Workspaces []string
	TokenFile  string
	NewToken   bool
	Exe        string // tests: the aot binary that runs loops
}

const serveLong = `Serve the loops of one or more workspaces (default: the working directory)
on a loopback address: a REST/SSE API under /api/ and the web dashboard at /.

Every loop is one AoT state file with an id loop-v2-YYYYMMDD-xxxxxx: the
workspace's own .claude/aot-loop-state.md shows up with no extra step; loops
created through the API live in .claude/aot-loops/ID/. Each has its CCW view
in .loop/ID.json, .loop/ID.tasks.jsonl and .loop/ID.progress/, kept in step
with its journal; a damaged or missing ID.json is rebuilt, and aot says so.

aot serve prints one URL holding the access token (kept, owner-only, in
--token-file and reused; --new-token replaces it). Loops started from the
API run as their own aot run processes and go on when aot serve stops.
A loop's files are read and written only inside the served workspaces
(links resolved, at every use); a slow or idle client is cut (timeouts
in docs/API.md); Ctrl-C ends the open streams and exits at once.
The API is documented in docs/API.md.`

func newCmdServe(d *deps, g *globalOptions, runF func(context.Context, *serveOptions) error) *cobra.Command {
	opts := &serveOptions{IO: d.io, Global: g}
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:PORT] [--workspace DIR ...]",
		Short: "The loop registry, its API and the web dashboard",
		Long:  serveLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			host, _, err := net.SplitHostPort(opts.Addr)
			if err != nil {
				return usagef("--addr %q: want HOST:PORT", opts.Addr)
			}
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				return usagef("--addr %q: aot serve listens on a loopback address only (127.0.0.1, ::1 or localhost)", opts.Addr)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return serveRun(cmd.Context(), opts)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.Addr, "addr", "127.0.0.1:7777", "loopback `HOST:PORT` to listen on (port 0: any free port)")
	f.StringArrayVar(&opts.Workspaces, "workspace", nil, "a folder whose loops are served (repeatable; default: the working directory)")
	f.StringVar(&opts.TokenFile, "token-file", "", "where the access token is kept (default: the user's config folder, aot/serve-token)")
	f.BoolVar(&opts.NewToken, "new-token", false, "replace the access token")
	return cmd
}

func serveRun(ctx context.Context, opts *serveOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	path := opts.TokenFile
	if path == "" {
		p, err := server.DefaultTokenFile()
		if err != nil {
			return err
		}
		path = p
	}
	token, err := server.LoadToken(path, opts.NewToken)
	if err != nil {
		return err
	}
	wss := opts.Workspaces
	if len(wss) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		wss = []string{wd}
	}
	log := slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Loops on Temporal are asked through their workflows (serve_temporal*.go).
	workflows := openWorkflows()
	defer workflows.Close()
	srv, err := server.New(server.Options{Workspaces: wss, Token: token, Exe: opts.Exe, Logger: log, Temporal: workflows})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.Addr, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	// Serve sets the address before it accepts; wait for it to be known.
	for srv.Addr() == "" {
		select {
		case err := <-errc:
			return err
		case <-time.After(5 * time.Millisecond):
		}
	}
	if opts.Global.JSON {
		writeJSON(opts.IO.Out, map[string]any{"url": srv.URL(), "addr": srv.Addr(), "loops": srv.LoopCount(), "token_file": path})
	} else {
		fmt.Fprintf(opts.IO.Out, "aot serve: %s, dashboard and API at\n  %s\n(the token is kept in %s; Ctrl-C stops serving, running loops go on)\n", brief.Count(srv.LoopCount(), "loop"), srv.URL(), path)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// The streams end at once; a request still being answered gets a
	// moment, then its connection is cut: Ctrl-C stops serving within a
	// second, and that is a success.
	sctx, cancel := context.WithTimeout(context.Background(), serveGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "aot serve: requests still being answered were cut short (%v)\n", err)
		_ = srv.Close()
	}
	return nil
}

// serveGrace is how long requests in flight are waited for at Ctrl-C.
const serveGrace = 700 * time.Millisecond
