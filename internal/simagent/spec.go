// Package simagent is a simulated coding agent for the outcome benchmark
// (bench/outcome). It speaks aot's exec protocol (one JSON task on stdin, one
// JSON answer on stdout) and does real file work in its working directory:
// deliverable K is the file out/K.txt whose only line is "K ok", checked by
// `grep -qx 'K ok' out/K.txt`.
//
// Its behaviour is drawn from a deterministic PRNG keyed by (seed, atom or
// deliverable, attempt, purpose), never by time or call order, so a run is
// reproducible even when several copies answer in parallel. Profiles are
// presets of its knobs: honest, liar, flaky, regressing, mixed.
package simagent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Spec is the simulated project: its deliverables and the work graph the sim
// itself obeys (a deliverable whose dependencies' files are not there cannot
// be done, whatever the runner believes).
type Spec struct {
	// GoalAtom is the atom id of a whole-goal task: the sim then attempts
	// every remaining deliverable in one call.
	GoalAtom     string        `json:"goal_atom"`
	Deliverables []Deliverable `json:"deliverables"`
}

// Deliverable is one file with an exact expected content.
type Deliverable struct {
	Name      string   `json:"name"`
	DependsOn []string `json:"depends_on,omitempty"` // deliverable names
	Slow      bool     `json:"slow,omitempty"`       // takes SlowFactor times longer
	// Alternatives make the deliverable an OR choice: one atom per approach,
	// tried in this order by a whole-goal call. Without them the atom id is
	// the deliverable's name.
	Alternatives []Alternative `json:"alternatives,omitempty"`
}

// Alternative is one approach to an OR deliverable.
type Alternative struct {
	Atom  string `json:"atom"`
	Works bool   `json:"works"` // false: this approach always fails
}

// DefaultGoalAtom is the atom id of whole-goal tasks when the spec names none.
const DefaultGoalAtom = "goal"

// fixMark separates a deliverable from the number of a fix atom the planner
// proposed for it (D03-fix-7).
const fixMark = "-fix-"

// File is the path of a deliverable's file, relative to the workdir.
func File(name string) string { return filepath.Join("out", name+".txt") }

// Content is a deliverable's exact expected content.
func Content(name string) string { return name + " ok\n" }

// CheckCommand is the base-case check of a deliverable.
func CheckCommand(name string) string {
	return fmt.Sprintf("grep -qx '%s ok' out/%s.txt", name, name)
}

// Done reports whether a deliverable's file in dir passes its check: some
// line is exactly "NAME ok" (what grep -qx does).
func Done(dir, name string) bool {
	data, err := os.ReadFile(filepath.Join(dir, File(name)))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if line == name+" ok" {
			return true
		}
	}
	return false
}

// ReadSpec reads a spec file.
func ReadSpec(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("spec %s: %w", path, err)
	}
	if s.GoalAtom == "" {
		s.GoalAtom = DefaultGoalAtom
	}
	return &s, s.validate()
}

// WriteSpec writes a spec file.
func WriteSpec(path string, s *Spec) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func (s *Spec) validate() error {
	seen := map[string]bool{}
	for _, d := range s.Deliverables {
		if d.Name == "" || strings.ContainsAny(d.Name, "' /\\") {
			return fmt.Errorf("spec: bad deliverable name %q", d.Name)
		}
		if seen[d.Name] {
			return fmt.Errorf("spec: deliverable %q twice", d.Name)
		}
		seen[d.Name] = true
	}
	for _, d := range s.Deliverables {
		for _, dep := range d.DependsOn {
			if !seen[dep] {
				return fmt.Errorf("spec: %s depends on unknown %q", d.Name, dep)
			}
		}
	}
	_, err := s.Order()
	return err
}

// Deliverable returns a deliverable by name.
func (s *Spec) Deliverable(name string) *Deliverable {
	for i := range s.Deliverables {
		if s.Deliverables[i].Name == name {
			return &s.Deliverables[i]
		}
	}
	return nil
}

// Lookup maps an atom id to its deliverable and, for an OR choice, the
// alternative: the deliverable's own name, one of its alternatives' atoms, or
// a planner's fix atom NAME-fix-N.
func (s *Spec) Lookup(atom string) (*Deliverable, *Alternative) {
	if i := strings.Index(atom, fixMark); i > 0 {
		atom = atom[:i]
	}
	for i := range s.Deliverables {
		d := &s.Deliverables[i]
		if d.Name == atom {
			return d, nil
		}
		for j := range d.Alternatives {
			if d.Alternatives[j].Atom == atom {
				return d, &d.Alternatives[j]
			}
		}
	}
	return nil, nil
}

// Order returns the deliverables in dependency order (stable: spec order
// among the ready ones), or an error on a cycle.
func (s *Spec) Order() ([]*Deliverable, error) {
	done := map[string]bool{}
	var out []*Deliverable
	for len(out) < len(s.Deliverables) {
		progress := false
		for i := range s.Deliverables {
			d := &s.Deliverables[i]
			if done[d.Name] {
				continue
			}
			ready := true
			for _, dep := range d.DependsOn {
				ready = ready && done[dep]
			}
			if ready {
				done[d.Name] = true
				out = append(out, d)
				progress = true
			}
		}
		if !progress {
			return nil, fmt.Errorf("spec: the deliverables' dependencies have a cycle")
		}
	}
	return out, nil
}
