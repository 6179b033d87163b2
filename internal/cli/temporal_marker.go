package cli

import (
	"os"
	"path/filepath"

	"github.com/aot-loop/aot/internal/journal"
)

// onTemporalLoop says whether stateFile's loop runs on Temporal: aot run
// --engine temporal leaves a marker beside the journal (package durable
// writes and reads it; this is only a look at whether it is there).
func onTemporalLoop(stateFile string) bool {
	_, err := os.Stat(filepath.Join(journal.DirFor(stateFile), "temporal.json"))
	return err == nil
}

// aot run --engine values.
const (
	engineLocal    = "local"
	engineTemporal = "temporal"
)
