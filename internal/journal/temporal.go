package journal

import (
	"os"
	"path/filepath"
)

// TemporalMarker is the file, beside the journal, by which aot run --engine
// temporal marks a loop whose engine is a Temporal workflow (package
// durable writes and reads it).
func TemporalMarker(stateFile string) string {
	return filepath.Join(DirFor(stateFile), "temporal.json")
}

// OnTemporal says whether stateFile's loop runs on Temporal: its marker is
// there. The commands that act on a loop (and aot serve) ask the workflow
// instead of the files a local engine watches.
func OnTemporal(stateFile string) bool {
	_, err := os.Stat(TemporalMarker(stateFile))
	return err == nil
}
