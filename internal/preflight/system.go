package preflight

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/aot-loop/aot/internal/confine"
)

// Sandbox checks whether the kernel lets aot confine its agents' writes.
func Sandbox() Check {
	st := confine.Probe()
	if st.On {
		return ok("sandbox", st.Why)
	}
	return warn("sandbox", "agents are not confined: "+st.Why,
		"agents still die with the engine; for confined writes run on Linux 5.19 or later with Landlock enabled (lsm=landlock)")
}

// TemporalDefaultAddress is where the Temporal CLI and SDK look without
// TEMPORAL_ADDRESS.
const TemporalDefaultAddress = "127.0.0.1:7233"

// Temporal checks that the Temporal service at address answers a TCP
// connection (TLS, the namespace and credentials are the SDK's to check).
func Temporal(ctx context.Context, address string) Check {
	if address == "" {
		address = TemporalDefaultAddress
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return TemporalUnreachable(fmt.Errorf("nothing answers at %s: %w", address, err))
	}
	conn.Close()
	return ok("temporal", address+" answers (aot-temporal checks the namespace and credentials too)")
}

// TemporalUnreachable is the check of a Temporal service that could not be
// reached, err saying how.
func TemporalUnreachable(err error) Check {
	return fail("temporal", err.Error(),
		"start Temporal (temporal server start-dev) or set TEMPORAL_ADDRESS to the service's host:port (and TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_* as the Temporal CLI takes them)")
}
