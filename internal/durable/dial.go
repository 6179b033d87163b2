package durable

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
)

// Dial connects to Temporal as the Temporal CLI does: TEMPORAL_ADDRESS
// (default localhost:7233), TEMPORAL_NAMESPACE (default "default"),
// TEMPORAL_API_KEY, TEMPORAL_TLS and the TEMPORAL_TLS_* certificate
// settings, and the profiles of the CLI's TOML file (TEMPORAL_CONFIG_FILE,
// TEMPORAL_PROFILE).
// The SDK's own log is discarded; DialWith gives it a place.
func Dial(ctx context.Context) (client.Client, error) { return DialWith(ctx, DialOptions{}) }

// DialOptions tune DialWith.
type DialOptions struct {
	// Log receives the SDK's log (its connection trouble, a worker's
	// failed polls and activity retries); nil discards it.
	Log *slog.Logger
	// Metrics receives the SDK's metrics (Metrics.SDK); nil: none.
	Metrics client.MetricsHandler
}

// DialWith is Dial with the SDK's log going to o.Log.
func DialWith(ctx context.Context, o DialOptions) (client.Client, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, fmt.Errorf("temporal connection settings: %w", err)
	}
	if opts.Logger == nil {
		l := o.Log
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		opts.Logger = log.NewStructuredLogger(l)
	}
	if opts.DataConverter == nil {
		opts.DataConverter = DataConverter()
	}
	if o.Metrics != nil {
		opts.MetricsHandler = o.Metrics
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		addr := opts.HostPort
		if addr == "" {
			addr = client.DefaultHostPort
		}
		return nil, fmt.Errorf("connect to Temporal at %s (TEMPORAL_ADDRESS): %w", addr, err)
	}
	return c, nil
}

// DataConverter is how the loop's payloads travel: JSON, compressed with
// zlib when that makes them smaller. A loop's state is most of its
// payloads (the workflow's input, Continue-As-New, the status query) and
// compresses about tenfold, which keeps a loop of 10,000 atoms well under
// Temporal's payload limits. Clients and workers of one loop must agree;
// payloads that are not compressed are read as they are.
func DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), Codec())
}

// Codec is the payload codec of DataConverter: what aot codec-server
// offers Temporal's UI and CLI, so that they show payloads as JSON.
func Codec() converter.PayloadCodec { return codec{} }

// LogLevels are the words --log-level and AOT_LOG_LEVEL take.
var LogLevels = []string{"debug", "info", "warn", "error"}

// ParseLogLevel reads one of LogLevels.
func ParseLogLevel(word string) (slog.Level, error) {
	var l slog.Level
	if !slices.Contains(LogLevels, strings.ToLower(word)) || l.UnmarshalText([]byte(word)) != nil {
		return 0, fmt.Errorf("log level %q: choose from %s", word, strings.Join(LogLevels, ", "))
	}
	return l, nil
}

// SDKLog is a logger for the SDK's log: one line of text per record on w,
// from level up, each marked as the SDK's.
func SDKLog(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With("from", "temporal-sdk")
}
