package hooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
)

// OwnerFile is the name of the file, in the state file's aot-loop folder,
// that names the session owning the running loop. It lives beside the
// journal, not in the state file, so State Contract v1.3 is untouched.
const OwnerFile = "session.json"

// Owner is the session that owns a loop run from inside a client.
type Owner struct {
	Client    Client `json:"client"`
	SessionID string `json:"session_id"`
	ClaimedAt string `json:"claimed_at"` // RFC 3339
	How       string `json:"how"`        // "start": recorded when the session started the loop
}

// OwnerPath is the owner file of a state file.
func OwnerPath(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), OwnerFile)
}

// ReadOwner returns the owner of stateFile's loop, or nil when none is
// recorded. A file that cannot be read as an owner is an error.
func ReadOwner(stateFile string) (*Owner, error) {
	data, err := os.ReadFile(OwnerPath(stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the loop's owner: %w", err)
	}
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil || o.SessionID == "" || o.Client == "" {
		return nil, fmt.Errorf("the loop's owner file %s is not valid (delete it, then start the loop again from the session that should drive it)", OwnerPath(stateFile))
	}
	return &o, nil
}

// owns reports whether the hook's session is o.
func (o *Owner) owns(c Client, session string) bool {
	return o != nil && o.Client == c && o.SessionID == session && session != ""
}

// record writes o as the owner. The file is written whole (a temp file
// linked into place), so a reader never sees half of it, and of two
// sessions starting the loop at once only one is recorded.
func record(stateFile string, o Owner) (*Owner, error) {
	if err := state.CheckPath(stateFile); err != nil {
		return nil, err
	}
	dir := journal.DirFor(stateFile)
	if err := os.MkdirAll(dir, journal.DirMode); err != nil {
		return nil, fmt.Errorf("record the loop's owner: %w", err)
	}
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".session-*.json")
	if err != nil {
		return nil, fmt.Errorf("record the loop's owner: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(append(data, '\n'))
	if err := errors.Join(werr, tmp.Chmod(journal.FileMode), tmp.Sync(), tmp.Close()); err != nil {
		return nil, fmt.Errorf("record the loop's owner: %w", err)
	}
	if err := os.Link(tmp.Name(), filepath.Join(dir, OwnerFile)); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("record the loop's owner: %w", err)
	}
	return ReadOwner(stateFile)
}

// sessionEnv names, per client, the variable through which the client
// gives its shell tool the session_id its hooks see: Claude Code 2.1.330
// sets CLAUDE_CODE_SESSION_ID; Codex 0.169.0 sets CODEX_THREAD_ID (its
// hooks' session_id is the thread id); Gemini CLI 0.61.0
// sets GEMINI_SESSION_ID only for its hooks, so a loop started from its
// shell tool has no owner (its hooks leave it alone).
var sessionEnv = []struct {
	client Client
	name   string
}{{Claude, "CLAUDE_CODE_SESSION_ID"}, {Codex, "CODEX_THREAD_ID"}, {Gemini, "GEMINI_SESSION_ID"}}

// RecordOwner records the session a loop is started from: `aot control
// status running` run by a session's shell tool (the plugin's
// enter-recursion runs it). This is the only way a session comes to own a
// loop: hooks never claim one. Any owner recorded before is forgotten
// first, so a loop started outside every session (a terminal, a script)
// has no owner and no session's hooks touch it. It returns whether a
// session was recorded.
func RecordOwner(stateFile string, getenv func(string) string, now time.Time) (bool, error) {
	if err := ReleaseOwner(stateFile); err != nil {
		return false, err
	}
	for _, e := range sessionEnv {
		id := getenv(e.name)
		if id == "" {
			continue
		}
		o, err := record(stateFile, Owner{Client: e.client, SessionID: id, ClaimedAt: now.Format(time.RFC3339), How: "start"})
		return o.owns(e.client, id), err
	}
	return false, nil
}

// ReleaseOwner forgets the loop's owner: the loop has ended, and the next
// start names its own.
func ReleaseOwner(stateFile string) error {
	err := os.Remove(OwnerPath(stateFile))
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("release the loop's owner: %w", err)
}

// CallerOwner is the loop's owner when the calling process runs inside it
// (a command its shell tool ran), else nil.
func CallerOwner(stateFile string, getenv func(string) string) *Owner {
	o, err := ReadOwner(stateFile)
	if err != nil || o == nil {
		return nil
	}
	for _, e := range sessionEnv {
		if o.owns(e.client, getenv(e.name)) {
			return o
		}
	}
	return nil
}

// ResumeHint is how a person brings an owning session back: the client's
// command that resumes it, then the plugin's command that continues the
// loop.
func (o *Owner) ResumeHint() string {
	switch o.Client {
	case Claude:
		return "claude --resume " + o.SessionID + ", then /aot-loop:enter-recursion"
	case Codex:
		return "codex resume " + o.SessionID + ", then ask it to continue the loop"
	}
	return "open a session of " + string(o.Client) + " and start the loop again"
}
