// Package archtest holds the house's rules that no single package can: the
// order of the layers (docs/ARCHITECTURE.md), read from what the packages
// really import.
package archtest

import (
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/aot-loop/aot/"

// layers is the picture of docs/ARCHITECTURE.md, from the bottom up: a
// package may import only packages of a lower layer.
var layers = [][]string{
	{"internal/state", "internal/brief", "internal/proc", "internal/plugin", "internal/fakellm", "internal/temporaltest", "internal/server/web"},
	{"internal/dag", "internal/confine", "internal/verify"},
	{"internal/agent", "internal/journal"},
	{"internal/prompt", "internal/history", "internal/runlock", "internal/workspace", "internal/align", "internal/demo", "internal/graphview", "internal/simagent"},
	{"internal/backend", "internal/ccw"},
	{"internal/engine", "internal/preflight"},
	{"internal/local"},
	{"internal/control", "internal/durable"},
	{"internal/hooks", "internal/server"},
	{"internal/cli"},
	{"cmd/aot", "cmd/aot-hook", "cmd/fakellm"},
}

func TestImportsPointDown(t *testing.T) {
	layer := map[string]int{}
	for i, pkgs := range layers {
		for _, p := range pkgs {
			layer[module+p] = i
		}
	}
	for _, tags := range []string{"", "temporal"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			pkg := fields[0]
			if strings.HasPrefix(pkg, module+"bench/") || path.Base(pkg) == "archtest" {
				continue
			}
			own, ok := layer[pkg]
			if !ok {
				t.Errorf("%s is in no layer: add it to layers here and to the picture in docs/ARCHITECTURE.md", pkg)
				continue
			}
			for _, imp := range fields[1:] {
				if !strings.HasPrefix(imp, module) {
					continue
				}
				if l, ok := layer[imp]; ok && l >= own {
					t.Errorf("%s (layer %d) imports %s (layer %d): imports point down only (tags %q)", strings.TrimPrefix(pkg, module), own, strings.TrimPrefix(imp, module), l, tags)
				}
			}
		}
	}
}
