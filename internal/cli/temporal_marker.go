package cli

import (
	"github.com/aot-loop/aot/internal/journal"
)

// onTemporalLoop says whether stateFile's loop runs on Temporal: aot run
// --engine temporal leaves a marker beside the journal (package durable
// writes and reads it; this is only a look at whether it is there).
func onTemporalLoop(stateFile string) bool { return journal.OnTemporal(stateFile) }

// aot run --engine values.
const (
	engineLocal    = "local"
	engineTemporal = "temporal"
)
