package durable

import (
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/aot-loop/aot/internal/temporaltest"
)

// devServer and quietLogger: see package temporaltest.
func devServer(t testing.TB) string { return temporaltest.DevServer(t) }

func quietLogger() log.Logger { return temporaltest.QuietLogger() }

// dialDev connects a client to the dev server at addr.
func dialDev(t *testing.T, addr string) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger(), DataConverter: DataConverter()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
