package state

import (
	"bufio"
	"bytes"
	"strings"
)

// PeekStatus reads control.status without reading the state: the
// frontmatter is scanned line by line up to the control section (near the
// top of every file aot writes), and the value is read as the fast scanner
// reads a scalar. ok is false when the value cannot be told this way (an
// unusual layout); the caller then reads the file through the store. The
// hooks use it only to give no decision early, never to approve or block.
// A FIFO or device is refused, as OpenRegular does.
func PeekStatus(path string) (status string, ok bool, err error) {
	f, err := OpenRegular(path) // a FIFO must not hang a hook
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	inControl := false
	childIndent := -1
	for sc.Scan() {
		b := bytes.TrimRight(sc.Bytes(), "\r")
		line++
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\uFEFF"))
			if string(bytes.TrimRight(b, " \t")) != fence {
				return "", false, nil
			}
			continue
		}
		if string(bytes.TrimRight(b, " \t")) == fence {
			return "", false, nil // end of the frontmatter
		}
		trimmed := bytes.TrimLeft(b, " ")
		if len(trimmed) == 0 || trimmed[0] == '#' {
			continue
		}
		indent := len(b) - len(trimmed)
		if indent == 0 {
			if inControl {
				return "", false, nil
			}
			inControl = string(bytes.TrimRight(b, " \t")) == "control:"
			continue
		}
		if !inControl {
			continue
		}
		if childIndent < 0 {
			childIndent = indent
		}
		if indent != childIndent || !bytes.HasPrefix(trimmed, []byte("status:")) {
			continue
		}
		status, ok := peekWord(string(trimmed[len("status:"):]))
		return status, ok, nil
	}
	return "", false, sc.Err()
}

// peekWord reads a one-word scalar (lower-case letters and '_'), plain or
// quoted, with an optional comment; ok is false for anything else.
func peekWord(v string) (string, bool) {
	v = strings.TrimLeft(v, " ")
	var w string
	switch {
	case v == "":
		return "", false
	case v[0] == '"' || v[0] == '\'':
		read := parseDouble
		if v[0] == '\'' {
			read = parseSingle
		}
		s, j, err := read(v, 0, len(v))
		if err != nil || !restIsComment(v, j, len(v)) {
			return "", false
		}
		w = s
	default:
		w = v[:plainEnd(v, 0, len(v))]
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return "", false
		}
	}
	return w, w != ""
}
