package state

import (
	"strings"
	"testing"
	"time"
)

func TestLoopIDAndExpectChangesRoundTrip(t *testing.T) {
	data := readFixture(t, "legacy-init.md")
	s := parseBoth(t, data)
	s.Control.LoopID = NewLoopID(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	no := false
	s.Atoms[0].ExpectChanges = &no
	out := Marshal(s)
	if !strings.Contains(string(out), "loop_id: ") || !strings.Contains(string(out), "expect_changes: false") {
		t.Fatalf("written file lacks the new keys:\n%s", out)
	}
	back := parseBoth(t, out)
	if back.Control.LoopID != s.Control.LoopID {
		t.Errorf("loop_id read back as %q, want %q", back.Control.LoopID, s.Control.LoopID)
	}
	if back.Atoms[0].ExpectChanges == nil || *back.Atoms[0].ExpectChanges {
		t.Errorf("expect_changes read back as %v, want false", back.Atoms[0].ExpectChanges)
	}
	if len(back.Atoms) > 1 && back.Atoms[1].ExpectChanges != nil {
		t.Errorf("an atom without expect_changes read back with %v", *back.Atoms[1].ExpectChanges)
	}
	if q, _, _, _, err := parseQuick(out); err != nil || q.Atoms[0].ExpectChanges == nil || *q.Atoms[0].ExpectChanges {
		t.Errorf("the hooks' quick reader disagrees: %v", err)
	}
}

func TestNewLoopIDsDifferAndAreValid(t *testing.T) {
	now := time.Now()
	seen := map[string]bool{}
	for range 200 {
		id := NewLoopID(now)
		if err := ValidID(id); err != nil {
			t.Fatalf("NewLoopID gave %q: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("NewLoopID repeated %q", id)
		}
		seen[id] = true
	}
}

func TestLoopIDWithUnsafeCharactersIsAnError(t *testing.T) {
	s := parseBoth(t, readFixture(t, "legacy-init.md"))
	s.Control.LoopID = "../main"
	for _, e := range Validate(s).Errors {
		if e.Field == "control.loop_id" {
			return
		}
	}
	t.Fatalf("no error on control.loop_id for %q: %v", s.Control.LoopID, Validate(s).Errors)
}
