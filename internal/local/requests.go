package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/engine"
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
	change  engine.Change
	control string // pause or resume; empty for a redirect
	kill    bool   // pause: kill the running agents instead of letting them finish
	bad     error
}

// requestDoc is a request file: a redirect's engine.Change, or a control request.
type requestDoc struct {
	Control string `json:"control,omitempty"`
	Kill    bool   `json:"kill,omitempty"`
	engine.Change
}

type answerDoc struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	Code    string `json:"code,omitempty"` // not_paused: engine.ErrNotPaused, so callers can tell it from a failure
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
		if errors.Is(err, engine.ErrNotPaused) {
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
// for its answer until ctx ends (see send for what is left then).
func SendRedirect(ctx context.Context, stateFile string, c engine.Change) error {
	return send(ctx, stateFile, "redirect", requestDoc{Change: c})
}

// send writes a request for the running engine and waits for its answer
// until ctx ends. Then a request the engine has not taken yet is withdrawn
// (its file removed: it will never act on it); one it has taken is acted on
// and its answer left in NAME.done. Either way the error wraps ctx.Err().
func send(ctx context.Context, stateFile, what string, doc requestDoc) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
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
	var answer []byte
	err = poll(ctx, func() bool {
		answer, err = os.ReadFile(done)
		return err == nil
	})
	if err != nil {
		if os.Remove(req) == nil {
			return fmt.Errorf("%s: the running engine did not take the request (%w); it was withdrawn", what, err)
		}
		return fmt.Errorf("%s: the engine took the request but did not answer (%w)", what, err)
	}
	_ = os.Remove(done)
	var a answerDoc
	if err := json.Unmarshal(answer, &a); err != nil {
		return fmt.Errorf("%s: unreadable answer: %w", what, err)
	}
	switch {
	case a.Code == "not_paused":
		return engine.ErrNotPaused
	case !a.Success:
		return &engine.RefusedError{Err: errors.New(a.Error)}
	}
	return nil
}

// pollEvery is how often a client looks for the engine's answer: the
// engine looks for requests between its steps, about as often.
const pollEvery = 20 * time.Millisecond

// poll calls done until it says true or ctx ends, whichever comes first,
// and returns ctx.Err() in the second case.
func poll(ctx context.Context, done func() bool) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
