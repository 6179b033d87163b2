package state

import (
	"fmt"
	"strings"
)

// Missing lists, as sentences, what the state lacks before a loop may work
// on it: contract errors, blank objective fields (blank text does not count),
// a base case without checks, an empty work graph. The control status is the
// caller's to judge (the gate and the engine accept different ones).
func (s *State) Missing() []string {
	missing := []string{}
	for _, e := range Validate(s).Errors {
		missing = append(missing, "the state is invalid: "+e.String())
	}
	o := &s.Objective
	for _, f := range []struct{ name, val string }{
		{"goal", o.Goal},
		{"background_intent", o.BackgroundIntent},
		{"deliverables", o.Deliverables},
		{"definition_of_done", o.DefinitionOfDone},
	} {
		if strings.TrimSpace(f.val) == "" {
			missing = append(missing, "objective."+f.name+" is missing or empty")
		}
	}
	switch b := o.BaseCase; {
	case b == nil:
		missing = append(missing, "objective.base_case is missing")
	case b.Legacy == nil && len(b.Checklist) == 0:
		missing = append(missing, "objective.base_case has no checks (the checklist is empty)")
	}
	if len(s.Atoms) == 0 {
		missing = append(missing, "the work graph has no atoms (at least 1 is needed)")
	}
	return missing
}

// StatusMissing is the sentence for a control status that is not one of want.
func StatusMissing(status string, want ...string) string {
	return fmt.Sprintf("control.status must be %s, not %q", strings.Join(want, " or "), status)
}

// GateMissing is what aot gate asks before a loop may start: Missing, and
// a control status a run may start from (pending or stopped).
func (s *State) GateMissing() []string {
	missing := s.Missing()
	if st := s.Control.Status; st != ControlPending && st != ControlStopped {
		missing = append(missing, StatusMissing(st, ControlPending, ControlStopped))
	}
	return missing
}
