package durable

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/client"
)

// A loop's names on Temporal and on the remote: its workflow id and its
// integration branch.

// WorkflowID names a loop's workflow after the loop's own id
// (control.loop_id: new at a loop's first start, kept across its resumes)
// and a digest of where it runs: this machine, this state file, this
// namespace. Two clones, or two namespaces, whose state files carry the
// same loop id (a state file committed with its id) never share a
// workflow; a resumed loop finds its own again. Its branches on the remote
// are named after it: aot/<id>/integration, aot/<id>/<atom>-<attempt>.
func WorkflowID(loopID, namespace, stateFile string) string {
	if namespace == "" {
		namespace = client.DefaultNamespace
	}
	host, _ := os.Hostname()
	abs, err := filepath.Abs(stateFile)
	if err != nil {
		abs = stateFile
	}
	sum := sha256.Sum256([]byte(host + "\x00" + abs + "\x00" + namespace))
	return "aot-" + loopID + "-" + hex.EncodeToString(sum[:])[:8]
}

// ofLoop reports whether the workflow id names a workflow of loopID.
func ofLoop(id, loopID string) bool {
	return loopID != "" && strings.HasPrefix(id, "aot-"+loopID+"-")
}

// integrationBranch is the branch on the remote that a loop's workflow
// merges into.
func integrationBranch(workflowID string) string { return "aot/" + workflowID + "/integration" }
