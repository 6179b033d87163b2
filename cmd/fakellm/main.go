// Command fakellm runs the scripted fake model server of package
// internal/fakellm, for trying agent CLIs by hand:
//
//	fakellm --script script.json --log requests.jsonl [--port 0] [--portfile F] [--ttl 10m]
//
// It prints the base URL, writes the port to --portfile (atomically) and
// serves until interrupted or until --ttl has passed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/aot-loop/aot/internal/fakellm"
)

type options struct {
	script   string
	log      string
	port     int
	portfile string
	ttl      time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if err := serve(ctx, opts, stdout); err != nil {
		fmt.Fprintln(stderr, "fakellm:", err)
		return 1
	}
	return 0
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.script, "script", "", "script `file` (JSON, see package internal/fakellm)")
	fs.StringVar(&o.log, "log", "", "append one JSON line per request to `file`")
	fs.IntVar(&o.port, "port", 0, "port on 127.0.0.1 (0 picks a free one)")
	fs.StringVar(&o.portfile, "portfile", "", "write the chosen port to `file`")
	fs.DurationVar(&o.ttl, "ttl", 10*time.Minute, "exit after this long (0: never)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.script == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "fakellm: --script is required and no arguments are taken")
		fs.Usage()
		return o, errors.New("usage")
	}
	return o, nil
}

func serve(ctx context.Context, o options, stdout io.Writer) error {
	script, err := fakellm.LoadScript(o.script)
	if err != nil {
		return err
	}
	srv, err := fakellm.New(script, fakellm.Options{Port: o.port, LogPath: o.log})
	if err != nil {
		return err
	}
	defer srv.Close()
	if o.portfile != "" {
		if err := writeAtomic(o.portfile, strconv.Itoa(srv.Port())); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, "listening on", srv.URL())
	if o.ttl > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.ttl)
		defer cancel()
	}
	<-ctx.Done()
	return nil
}

func writeAtomic(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".portfile*")
	if err != nil {
		return fmt.Errorf("write portfile: %w", err)
	}
	_, err = tmp.WriteString(content)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write portfile: %w", err)
	}
	return nil
}
