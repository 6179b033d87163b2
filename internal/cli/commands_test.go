package cli

import (
	"testing"
)

// Only the command a call names is built; the table that names them must
// say what each command calls itself, or a call would find no command.
func TestEveryCommandIsCalledByItsName(t *testing.T) {
	d := &deps{io: newStreams(nil, nil, nil, func(string) string { return "" }), getenv: func(string) string { return "" }}
	g := &globalOptions{}
	seen := map[string]bool{}
	for _, c := range commands(d, g) {
		if got := c.make().Name(); got != c.name {
			t.Errorf("the table names %q the command that calls itself %q", c.name, got)
		}
		if seen[c.name] {
			t.Errorf("%q is in the table twice", c.name)
		}
		seen[c.name] = true
		if got := calledCommand(d, []string{"--json", "--state-file", "x.md", c.name, "--help"}); got != c.name {
			t.Errorf("calledCommand(... %s ...) = %q", c.name, got)
		}
	}
	for _, args := range [][]string{nil, {"help", "run"}, {"--help"}, {"stauts"}, {"-x", "run"}, {"completion", "bash"}} {
		if got := calledCommand(d, args); got != "" {
			t.Errorf("calledCommand(%q) = %q, want the whole tree", args, got)
		}
	}
	if n := len(newCmdRootFor(d, "status").Commands()); n != 1 {
		t.Errorf("a call of aot status built %d commands", n)
	}
}
