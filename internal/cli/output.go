package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/mattn/go-isatty"

	"github.com/aot-loop/aot/internal/control"
)

// streams is where every command reads and writes. Whether stdout takes
// colours is decided once, here.
type streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	color  bool
	tty    bool // stdout is a terminal: live progress is shown
}

func newStreams(in io.Reader, out, errOut io.Writer, getenv func(string) string) *streams {
	s := &streams{In: in, Out: out, ErrOut: errOut}
	if f, ok := out.(*os.File); ok {
		s.tty = isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
		s.color = s.tty && getenv("NO_COLOR") == ""
	}
	return s
}

// ANSI styles used for people's output.
const (
	styleBold    = "1"
	styleDim     = "2"
	styleRed     = "31"
	styleGreen   = "32"
	styleYellow  = "33"
	styleCyan    = "36"
	styleDefault = "39"
)

// paint wraps s in an ANSI style when stdout is a terminal.
func (s *streams) paint(style, text string) string {
	if !s.color || text == "" {
		return text
	}
	return "\x1b[" + style + "m" + text + "\x1b[0m"
}

// status colours an atom or loop status.
func (s *streams) status(st string) string {
	switch st {
	case "resolved", "completed", "passed", "ready", "valid":
		return s.paint(styleGreen, st)
	case "in_progress", "running":
		return s.paint(styleCyan, st)
	case "stopped", "failed", "not ready", "invalid":
		return s.paint(styleRed, st)
	case "pending":
		return s.paint(styleYellow, st)
	}
	return s.paint(styleDefault, st)
}

// table returns a tabwriter for aligned columns on stdout; call Flush.
// tabwriter counts colour codes as width, so a coloured column must colour
// every cell with a code of the same length (all status colours are).
func (s *streams) table() *tabwriter.Writer {
	return tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
}

// writeJSON prints v as one indented JSON document: UTF-8 kept raw, no HTML
// escaping, a trailing newline.
func writeJSON(w io.Writer, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		// Only unsupported values fail; the types here are all plain.
		fmt.Fprintf(&buf, "{\"success\": false, \"error\": %q}\n", err.Error())
	}
	_, _ = w.Write(buf.Bytes())
}

// failure is the generic JSON error document.
type failure struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
	// Code names the few failures a program tells apart from the others
	// (refused, no_engine, not_paused, no_worker): see failureCode.
	Code string `json:"code,omitempty"`
}

// failureCode is the code of failure.Code: the hand-over's code
// (control.CodeOf) for the few failures a program tells apart, else "".
func failureCode(err error) string {
	switch c := control.CodeOf(err); c {
	case control.CodeRefused, control.CodeNoEngine, control.CodeNotPaused, control.CodeNoWorker:
		return string(c)
	}
	return ""
}

// issueStrings renders issues as the plain strings of JSON output.
func issueStrings[T fmt.Stringer](list []T) []string {
	out := make([]string, 0, len(list))
	for _, i := range list {
		out = append(out, i.String())
	}
	return out
}

// orDash shows an empty value as "-" in a table.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
