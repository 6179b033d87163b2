package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/journal"
)

// A redirect for a running engine travels as a request file in
// .claude/aot-loop/requests/: the client writes NAME.json atomically, the
// engine applies it between agent runs and answers with NAME.done.

func requestDir(stateFile string) string {
	return filepath.Join(journal.DirFor(stateFile), "requests")
}

type request struct {
	path    string
	change  Change
	control string // pause or resume; empty for a redirect
	kill    bool   // pause: kill the running agents instead of letting them finish
	bad     error
}

// requestDoc is a request file: a redirect's Change, or a control request.
type requestDoc struct {
	Control string `json:"control,omitempty"`
	Kill    bool   `json:"kill,omitempty"`
	Change
}

type answerDoc struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	Code    string `json:"code,omitempty"` // not_paused: ErrNotPaused, so callers can tell it from a failure
}

// pendingRequests returns the unanswered requests, oldest first.
func pendingRequests(stateFile string) ([]request, error) {
	dir := requestDir(stateFile)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("requests: %w", err)
	}
	var names []string
	for _, en := range entries {
		if n := en.Name(); strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []request
	for _, n := range names {
		p := filepath.Join(dir, n)
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		r := request{path: p}
		var doc requestDoc
		if err := json.Unmarshal(data, &doc); err != nil {
			r.bad = fmt.Errorf("request %s: %w", n, err)
		}
		r.change, r.control, r.kill = doc.Change, doc.Control, doc.Kill
		if r.bad == nil && r.control != "" && r.control != controlPause && r.control != controlResume {
			r.bad = fmt.Errorf("request %s: unknown control %q", n, r.control)
		}
		out = append(out, r)
	}
	return out, nil
}

// answer writes the engine's answer to a request and removes the request.
func answer(r request, err error) {
	doc := answerDoc{Success: err == nil}
	if err != nil {
		doc.Error = err.Error()
		if errors.Is(err, ErrNotPaused) {
			doc.Code = "not_paused"
		}
	}
	data, _ := json.Marshal(doc)
	done := strings.TrimSuffix(r.path, ".json") + ".done"
	tmp := done + ".tmp"
	if os.WriteFile(tmp, data, journal.FileMode) == nil {
		_ = os.Rename(tmp, done)
	}
	_ = os.Remove(r.path)
}

// SendRedirect hands a change to the running engine of stateFile and waits
// up to wait for its answer.
func SendRedirect(stateFile string, c Change, wait time.Duration) error {
	return send(stateFile, "redirect", requestDoc{Change: c}, wait)
}

// send writes a request for the running engine and waits for its answer.
func send(stateFile, what string, doc requestDoc, wait time.Duration) error {
	dir := requestDir(stateFile)
	if err := os.MkdirAll(dir, journal.DirMode); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	name := strconv.FormatInt(time.Now().UnixNano(), 10) + "-" + strconv.Itoa(os.Getpid())
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, journal.FileMode); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	req := filepath.Join(dir, name+".json")
	if err := os.Rename(tmp, req); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	done := filepath.Join(dir, name+".done")
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(done); err == nil {
			_ = os.Remove(done)
			var a answerDoc
			if err := json.Unmarshal(data, &a); err != nil {
				return fmt.Errorf("%s: unreadable answer: %w", what, err)
			}
			switch {
			case a.Code == "not_paused":
				return ErrNotPaused
			case !a.Success:
				return &RefusedError{Err: errors.New(a.Error)}
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	if os.Remove(req) == nil {
		return fmt.Errorf("%s: the running engine did not take the request within %s; it was withdrawn", what, wait)
	}
	return fmt.Errorf("%s: the engine took the request but did not answer within %s", what, wait)
}
