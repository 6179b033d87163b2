package agent

import (
	"fmt"
	"unicode/utf8"
)

// Bounds on an answer's fields: what an agent says goes into the state file
// (summaries, artifacts, planned atoms), which every command reads whole.
// A summary, findings or evidence past MaxSummary is cut to fit, with a
// marker (Fit): the work is done, and the whole text stays in the attempt's
// log. Past the other bounds the answer is a failed attempt with a reason
// that names the field, never a state file grown by megabytes.
const (
	MaxSummary     = 16 << 10 // bytes of a summary, findings or evidence kept in the state file
	MaxArtifacts   = 1000     // paths in artifacts
	MaxPath        = 4096     // bytes of one artifact path
	MaxPlanned     = 200      // atoms and children a planner may propose at once
	MaxDescription = 4 << 10  // bytes of a planned atom's description
	MaxID          = 200      // bytes of a planned atom's id
)

// Fit cuts r's summary, findings and evidence to MaxSummary bytes each,
// ending each one cut with a marker that says how much was kept. It returns
// a note per field cut (none when all fit).
func Fit(r *Result) []string {
	var notes []string
	for _, f := range []struct {
		name string
		v    *string
	}{{"summary", &r.Summary}, {"findings", &r.Findings}, {"evidence", &r.Evidence}} {
		if len(*f.v) <= MaxSummary {
			continue
		}
		whole := len(*f.v)
		marker := fmt.Sprintf("\n[aot: the %s is %d bytes; the state file keeps the first %%d, the attempt's log has it whole]", f.name, whole)
		keep := MaxSummary - len(marker) - 10 // room for the number
		for keep > 0 && !utf8.RuneStart((*f.v)[keep]) {
			keep-- // not in the middle of a character
		}
		*f.v = (*f.v)[:keep] + fmt.Sprintf(marker, keep)
		notes = append(notes, fmt.Sprintf("the answer's %s was %d bytes: cut to %d in the state file", f.name, whole, keep))
	}
	return notes
}

// CheckBounds reports the first field of r past its bound. Summary,
// findings and evidence are not refused for their size: Fit cuts them.
func CheckBounds(r Result) error {
	if len(r.Artifacts) > MaxArtifacts {
		return fmt.Errorf("the answer lists %d artifacts; at most %d", len(r.Artifacts), MaxArtifacts)
	}
	for i, a := range r.Artifacts {
		if len(a) > MaxPath {
			return fmt.Errorf("the answer's artifacts[%d] is %d bytes long; at most %d", i, len(a), MaxPath)
		}
	}
	planned := len(r.Atoms)
	for _, d := range r.Decompositions {
		planned += len(d.Children)
	}
	if planned > MaxPlanned {
		return fmt.Errorf("the planner proposed %d atoms at once; at most %d", planned, MaxPlanned)
	}
	check := func(where string, a PlannedAtom) error {
		if len(a.ID) > MaxID {
			return fmt.Errorf("the planner's %s id is %d bytes; at most %d", where, len(a.ID), MaxID)
		}
		if len(a.Description) > MaxDescription {
			return fmt.Errorf("the planner's %s %q has a %d-byte description; at most %d", where, a.ID, len(a.Description), MaxDescription)
		}
		return nil
	}
	for _, a := range r.Atoms {
		if err := check("atom", a); err != nil {
			return err
		}
	}
	for _, d := range r.Decompositions {
		for _, c := range d.Children {
			if err := check("child", c); err != nil {
				return err
			}
		}
	}
	return nil
}
