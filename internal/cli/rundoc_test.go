package cli

import (
	"encoding/json"
	"testing"

	"github.com/aot-loop/aot/internal/engine"
)

func TestRunJSONOfAnEngineErrorHasTheErrorShape(t *testing.T) {
	data, err := json.Marshal(runDoc(engine.Outcome{Reason: engine.Failed, ExitCode: 1, Message: "write state: disk full"}))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["success"] != false || doc["error"] != "write state: disk full" || doc["reason"] != "error" || doc["exit_code"] != 1.0 {
		t.Fatalf("doc = %s", data)
	}
	data, _ = json.Marshal(runDoc(engine.Outcome{Reason: engine.Completed}))
	if err := json.Unmarshal(data, &doc); err != nil || doc["reason"] != "completed" {
		t.Fatalf("completed doc = %s", data)
	}
}
