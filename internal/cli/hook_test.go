package cli

// aot hook reads the state file but answers every bad path with no decision
// and exit 0 (a hook never fails a session), not the exit 1 of the commands
// in stateCommands: testdata/script/hook_statepath.txtar covers it.
func init() { stateFree = append(stateFree, "aot hook") }
