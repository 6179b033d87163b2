package ccw

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

func TestNewID(t *testing.T) {
	now := time.Date(2026, 1, 22, 23, 30, 0, 0, time.FixedZone("+08", 8*3600))
	id := NewID(now, bytes.NewReader([]byte{0, 0, 0, 0, 0, 0, 0, 37}))
	if id != "loop-v2-20260122-110000" {
		t.Errorf("NewID = %q", id)
	}
	a, b := NewID(now, bytes.NewReader(bytes.Repeat([]byte{1}, 8))), NewID(now, bytes.NewReader(bytes.Repeat([]byte{2}, 8)))
	if a == b || !ValidID(a) || !ValidID(b) {
		t.Errorf("ids %q %q", a, b)
	}
	if id := NewID(now, failingReader{}); !ValidID(id) {
		t.Errorf("id without entropy %q is not valid", id)
	}
}

func TestIDFor(t *testing.T) {
	created := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	a := IDFor("/work/app/.claude/aot-loop-state.md", created)
	if a != IDFor("/work/app/.claude/aot-loop-state.md", created.Add(time.Hour)) {
		t.Error("IDFor changes within a day")
	}
	if a == IDFor("/work/other/.claude/aot-loop-state.md", created) {
		t.Error("two state files share an id")
	}
	if !ValidID(a) || a[:17] != "loop-v2-20260304-" {
		t.Errorf("IDFor = %q", a)
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"loop-v2-20260122-abc123":  true,
		"loop-v2-20260122-000000":  true,
		"loop-v2-20260122-ABC123":  false,
		"loop-v2-20261322-abc123":  false, // month 13
		"loop-v2-2026012x-abc123":  false,
		"loop-v2-20260122-abc12":   false,
		"loop-v2-20260122-abc1234": false,
		"loop-v2-20260122_abc123":  false,
		"loop-v1-20260122-abc123":  false,
		"loop-v2-20260122-abc/23":  false,
		"../../etc/passwd":         false,
		"":                         false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %t, want %t", id, got, want)
		}
	}
}
