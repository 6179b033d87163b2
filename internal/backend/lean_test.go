package backend

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The aot binary calls the model APIs with net/http: the providers' SDKs
// tripled its size and start time, so neither may come back through any
// package aot links.
func TestAotLinksNoProviderSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/aot-loop/aot/cmd/aot").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps printed %d packages: %s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/openai/") || strings.HasPrefix(p, "github.com/anthropics/") {
			t.Errorf("cmd/aot links %s", p)
		}
	}
}

// maxAotBytes is the size bin/aot must stay under (docs/PERFORMANCE.md).
const maxAotBytes = 30 << 20

func TestAotBinaryUnder30MB(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "aot")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/aot-loop/aot/cmd/aot").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= maxAotBytes {
		t.Errorf("bin/aot is %.1f MB, want under %d MB", float64(fi.Size())/(1<<20), maxAotBytes>>20)
	}
}
