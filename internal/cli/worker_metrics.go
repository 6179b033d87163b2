//go:build temporal

package cli

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/aot-loop/aot/internal/durable"
)

// metricsAddr is where --metrics-addr listens: a port alone (or ":port")
// is on the loopback interface, so a worker's metrics are not on the
// network unless a host is named (0.0.0.0:9464 for all interfaces).
func metricsAddr(flag string) (string, error) {
	if flag == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(flag)
	if err != nil {
		host, port = "", flag
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("%q is not [host:]port", flag)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// listenMetrics opens the worker's metrics and health listener for
// --metrics-addr; nothing when it is empty.
func listenMetrics(flag string) (net.Listener, *durable.Metrics, error) {
	addr, err := metricsAddr(flag)
	if err != nil || addr == "" {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return ln, durable.NewMetrics(), nil
}

// buildID is a worker's default build id: the binary's version, with what
// is not a letter, digit or one of ".+-_" made a dash ("(devel)" is
// "devel").
func buildID(version string) string {
	id := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".+-_", r) {
			return r
		}
		return '-'
	}, version)
	if id = strings.Trim(id, "-"); id == "" {
		return "unknown"
	}
	return id
}

// checkBuildID refuses a build id Temporal would refuse.
func checkBuildID(id string) error {
	if len(id) > 255 {
		return errors.New("longer than 255 bytes")
	}
	if strings.ContainsAny(id, " \t\n") {
		return fmt.Errorf("%q has white space", id)
	}
	return nil
}
