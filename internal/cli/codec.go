//go:build temporal

package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/converter"

	"github.com/aot-loop/aot/internal/durable"
)

// aot codec-server: the loops' payloads are JSON compressed with zlib
// (durable.DataConverter), unreadable in Temporal's UI and CLI until they
// ask a codec server to decode them.

type codecOptions struct {
	IO        *streams
	Addr      string
	UIOrigins []string
}

const codecLong = `aot codec-server serves the codec of aot's Temporal payloads over HTTP, so
that Temporal's own tools show a loop's workflow input, results, status
query and stack as JSON instead of compressed bytes:

  temporal workflow show --workflow-id ID --codec-endpoint http://127.0.0.1:8081

In the Temporal UI, set the codec server's endpoint (the settings of the
workflow view) to the same address; --ui-origin names the UI's origin (its
scheme, host and port), which the browser must be allowed to call it from.

It listens on 127.0.0.1 by default: anyone who reaches it can decode (and
encode) payloads. It needs no connection to Temporal. Ctrl-C stops it.`

func newCmdCodecServer(d *deps, g *globalOptions, runF func(*codecOptions) error) *cobra.Command {
	opts := &codecOptions{IO: d.io}
	cmd := &cobra.Command{
		Use:   "codec-server [--addr 127.0.0.1:8081] [--ui-origin URL]",
		Short: "Decode aot's payloads for the Temporal UI and CLI (--codec-endpoint)",
		Long:  codecLong,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
				return usagef("--addr %q: %v (host:port, e.g. 127.0.0.1:8081)", opts.Addr, err)
			}
			for _, o := range opts.UIOrigins {
				if o != "*" && !validOrigin(o) {
					return usagef("--ui-origin %q: an origin is a scheme and a host, e.g. http://localhost:8233", o)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			return codecServe(ctx, opts)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.Addr, "addr", "127.0.0.1:8081", "`host:port` to listen on (port 0: any free port)")
	f.StringSliceVar(&opts.UIOrigins, "ui-origin", []string{"http://localhost:8233", "http://127.0.0.1:8233"},
		"`origins` of the Temporal UI allowed to call this server from a browser (CORS); * allows any")
	return cmd
}

// validOrigin: scheme://host[:port], nothing after.
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Path == "" && u.RawQuery == "" && u.User == nil
}

// codecServe serves until ctx ends.
func codecServe(ctx context.Context, opts *codecOptions) error {
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", opts.Addr, err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{Handler: codecHandler(opts.UIOrigins), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(opts.IO.Out, "aot codec-server: decoding aot's payloads at http://%s (temporal workflow show --codec-endpoint http://%s); Ctrl-C stops\n", addr, addr)
	if host, _, _ := net.SplitHostPort(addr); !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(opts.IO.ErrOut, "aot codec-server: %s is reachable from other machines: whoever reaches it can read the loops' payloads\n", addr)
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// codecHandler is the SDK's codec handler (POST /encode, POST /decode)
// with aot's codec, answering the browser's CORS questions for origins.
func codecHandler(origins []string) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(durable.Codec())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && (slices.Contains(origins, o) || slices.Contains(origins, "*")) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", o)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		codec.ServeHTTP(w, r)
	})
}
