package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// aot align writes the state file: it is refused on every path the other
// commands refuse, and prints one JSON document on each.
func init() {
	stateCommands = append(stateCommands,
		[]string{"align", "--yes", "--agent-command", "true", "r"},
		[]string{"align", "--force", "--yes", "--agent-command", "true", "r"})
}

// TestAlignScript runs align.txtar (also part of TestScripts) on its own:
// the non-interactive forms, their refusals and what they write.
func TestAlignScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Files: []string{"testdata/script/align.txtar"},
		Setup: func(env *testscript.Env) error {
			env.Setenv("NO_COLOR", "1")
			env.Setenv(envStateFile, "")
			return nil
		},
	})
}

// Flags map to options; nothing runs.
func TestAlignFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    func(o *alignOptions) bool
		wantErr string
	}{
		{name: "yes", args: []string{"--yes", "--agent-command", "x", "add", "health"},
			want: func(o *alignOptions) bool { return o.Yes && o.Request == "add health" && o.agents != nil }},
		{name: "answers", args: []string{"--answers", "a.yaml", "--agent-command", "x", "r"},
			want: func(o *alignOptions) bool { return o.AnswersFile == "a.yaml" && !o.Yes }},
		{name: "role", args: []string{"--yes", "--role", "align=exec", "--agent-command", "x", "r"},
			want: func(o *alignOptions) bool { return len(o.Roles) == 1 }},
		{name: "no terminal", args: []string{"--agent-command", "x", "r"}, wantErr: "no terminal"},
		{name: "no request", args: []string{"--yes", "--agent-command", "x"}, wantErr: "missing argument REQUEST"},
		{name: "both", args: []string{"--yes", "--answers", "a", "--agent-command", "x", "r"}, wantErr: "exclude each other"},
		{name: "unknown role", args: []string{"--yes", "--role", "boss=exec", "--agent-command", "x", "r"}, wantErr: "unknown role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			d := &deps{io: &streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, getenv: func(string) string { return "" }}
			g := &globalOptions{StateFile: t.TempDir() + "/.claude/aot-loop-state.md"}
			var got *alignOptions
			cmd := newCmdAlign(d, g, func(o *alignOptions) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if _, usage := err.(*usageError); !usage {
					t.Errorf("err = %T, want a usage error (exit 2)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !tc.want(got) {
				t.Fatalf("options = %+v", got)
			}
		})
	}
}
