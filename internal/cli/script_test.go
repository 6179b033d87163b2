package cli

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary act as the aot command inside scripts.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"aot": func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs every testdata/script/*.txtar: each is a user session
// with the aot command, its outputs, exit codes and resulting files.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("NO_COLOR", "1")
			env.Setenv(envStateFile, "")
			return nil
		},
	})
}
