//go:build temporal

package cli

import "testing"

func TestMetricsAddrIsLoopbackUnlessAHostIsNamed(t *testing.T) {
	for _, c := range []struct{ flag, want, err string }{
		{"", "", ""},
		{"9464", "127.0.0.1:9464", ""},
		{":9464", "127.0.0.1:9464", ""},
		{"0.0.0.0:9464", "0.0.0.0:9464", ""},
		{"[::1]:9464", "[::1]:9464", ""},
		{"metrics.internal:0", "metrics.internal:0", ""},
		{"127.0.0.1:http", "", `"127.0.0.1:http" is not [host:]port`},
		{"65536", "", `"65536" is not [host:]port`},
	} {
		got, err := metricsAddr(c.flag)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("metricsAddr(%q) = %q, %v; want %q, %q", c.flag, got, err, c.want, c.err)
		}
	}
}

func TestBuildIDFromTheVersion(t *testing.T) {
	for version, want := range map[string]string{
		"v1.4.0":                              "v1.4.0",
		"(devel)":                             "devel",
		"v0.0.0-20261125203923-b070990+dirty": "v0.0.0-20261125203923-b070990+dirty",
		"":                                    "unknown",
		"v1 beta/2":                           "v1-beta-2",
	} {
		if got := buildID(version); got != want {
			t.Errorf("buildID(%q) = %q, want %q", version, got, want)
		}
	}
}
