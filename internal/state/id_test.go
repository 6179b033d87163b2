package state

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for _, id := range []string{"A1", "a", "0", "build.api_v2-fix", strings.Repeat("x", 64)} {
		if err := ValidID(id); err != nil {
			t.Errorf("ValidID(%q) = %v; want nil", id, err)
		}
	}
	for _, id := range []string{"", "A 1", "a/b", "$(touch x)", "-rf", ".hidden", "_x", "é", "a\nb", strings.Repeat("x", 65)} {
		err := ValidID(id)
		if err == nil {
			t.Errorf("ValidID(%q) = nil; want an error", id)
			continue
		}
		if !strings.Contains(err.Error(), IDRule) {
			t.Errorf("ValidID(%q) = %q; want the rule in the message", id, err)
		}
	}
}

func TestValidateWarnsAboutIDsOutsideTheSafeSet(t *testing.T) {
	s := mustParse(t, strings.Replace(miniState, "id: A1", `id: "A 1"`, 1))
	r := Validate(s)
	got := atomWarnings(r)
	if !r.Valid() || len(got) != 1 || !strings.Contains(got[0], `the atom id "A 1" holds ' '`) {
		t.Errorf("Validate = %+v; want valid with one warning about the id", r)
	}
}

func TestValidateWarnsAboutWorkAheadOfItsDependencies(t *testing.T) {
	src := strings.Replace(miniState, `atoms:
  - id: A1
    description: "one"
    status: pending
    depends_on: []`, `atoms:
  - id: A1
    description: "one"
    status: pending
    depends_on: []
  - id: B1
    description: "choice one"
    status: pending
    depends_on: []
    or_group: g
  - id: B2
    description: "choice two"
    status: resolved
    depends_on: []
    or_group: g
  - id: C
    description: "needs A1 and the group"
    status: in_progress
    depends_on: [A1, B1]
or_groups:
  g:
    choices: [B1, B2]
    selected: B2
    failed: [B1]`, 1)
	r := Validate(mustParse(t, src))
	if !r.Valid() {
		t.Fatalf("errors: %v", r.Errors)
	}
	got := atomWarnings(r)
	if len(got) != 1 || !strings.Contains(got[0], `atom "C" is in_progress while its dependency "A1" is not resolved`) {
		t.Errorf("warnings = %q; want one about C and A1 (B1's group is resolved through B2)", got)
	}
}

// atomWarnings are the warnings about atoms (miniState lacks some sections,
// which is warned about too).
func atomWarnings(r Report) []string {
	var out []string
	for _, w := range r.Warnings {
		if strings.HasPrefix(w.Field, "atoms") {
			out = append(out, w.String())
		}
	}
	return out
}
