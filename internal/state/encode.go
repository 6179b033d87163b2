package state

import (
	"strconv"
	"strings"
	"unsafe"
)

// Known keys of each mapping the contract defines: a write deletes such a key
// when the model no longer has it, and never touches keys it does not know.
const (
	ownNone uint8 = iota
	ownObjective
	ownConstraints
	ownBaseCase
	ownItem
	ownCheck
	ownCriterion
	ownControl
	ownAtom
	ownDecomposition
	ownORGroup
	ownBinding
	ownTrail
	ownCorrection
	ownAll uint8 = 255
)

var ownedKeys = map[uint8][]string{
	ownObjective:     {"goal", "base_case", "background_intent", "deliverables", "definition_of_done", "constraints"},
	ownConstraints:   keysOf(constraintsFields),
	ownBaseCase:      {"type", "value", "checklist", "criteria", "rubric", "pass_threshold", "scope", "timeout"},
	ownItem:          {"item", "check", "group", "any_of"},
	ownCheck:         {"type", "value", "criteria", "rubric", "pass_threshold", "scope", "timeout"},
	ownCriterion:     {"criterion", "description", "weight", "levels"},
	ownControl:       keysOf(controlFields),
	ownAtom:          keysOf(atomFields),
	ownDecomposition: keysOf(decompositionFields),
	ownORGroup:       keysOf(orGroupFields),
	ownBinding:       keysOf(bindingFields),
	ownTrail:         keysOf(trailFields),
	ownCorrection:    keysOf(correctionFields),
}

func owns(set uint8, key string) bool {
	if set == ownAll {
		return true
	}
	for _, k := range ownedKeys[set] {
		if k == key {
			return true
		}
	}
	return false
}

// encoder builds the canonical tree of a State (or of one of its parts).
type encoder struct{ t *tree }

func newEncoder() *encoder { return &encoder{t: newTree("", 32)} }

func (e *encoder) mapOf(own uint8) int32 {
	m := e.t.newMap()
	e.t.nodes[m].tag = tag(own)
	return m
}

// text is free text: always double-quoted.
func (e *encoder) text(s string) int32 {
	n := e.t.scalar(s, tStr)
	e.t.nodes[n].style = stDouble
	return n
}

// ident is an identifier or enum value: plain when that reads back the same.
func (e *encoder) ident(s string) int32 {
	n := e.t.scalar(s, tStr)
	e.t.nodes[n].style = stPlain
	return n
}

func (e *encoder) integer(v int64) int32 { return e.t.scalar(strconv.FormatInt(v, 10), tInt) }

func (e *encoder) float(v float64) int32 {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		return e.t.scalar(s, tInt)
	}
	return e.t.scalar(s, tFloat)
}

func (e *encoder) boolean(v bool) int32 { return e.t.scalar(strconv.FormatBool(v), tBool) }
func (e *encoder) null() int32          { return e.t.scalar("null", tNull) }

func (e *encoder) idents(list []string) int32 {
	q := e.t.newSeq()
	for _, s := range list {
		e.t.appendChild(q, e.ident(s))
	}
	return q
}

func (e *encoder) texts(list []string) int32 {
	q := e.t.newSeq()
	for _, s := range list {
		e.t.appendChild(q, e.text(s))
	}
	return q
}

func (e *encoder) objective(o *Objective) int32 {
	m := e.mapOf(ownObjective)
	e.t.set(m, "goal", e.text(o.Goal))
	if o.BaseCase != nil {
		e.t.set(m, "base_case", e.baseCase(o.BaseCase))
	}
	e.t.set(m, "background_intent", e.text(o.BackgroundIntent))
	e.t.set(m, "deliverables", e.text(o.Deliverables))
	e.t.set(m, "definition_of_done", e.text(o.DefinitionOfDone))
	cm := e.fields(ownConstraints, constraintsFields, unsafe.Pointer(&o.Constraints))
	e.t.set(m, "constraints", cm)
	return m
}

func (e *encoder) baseCase(b *BaseCase) int32 {
	if b.Legacy != nil && !b.HasChecklist {
		return e.check(b.Legacy, ownBaseCase)
	}
	m := e.mapOf(ownBaseCase)
	e.t.set(m, "checklist", e.checklist(b.Checklist))
	return m
}

func (e *encoder) checklist(items []ChecklistItem) int32 {
	q := e.t.newSeq()
	for i := range items {
		it := &items[i]
		m := e.mapOf(ownItem)
		e.t.set(m, "item", e.text(it.Item))
		if it.Check != nil {
			e.t.set(m, "check", e.check(it.Check, ownCheck))
		}
		if it.HasGroup || len(it.Group) > 0 {
			e.t.set(m, "group", e.checklist(it.Group))
		}
		if it.HasAnyOf || len(it.AnyOf) > 0 {
			e.t.set(m, "any_of", e.checklist(it.AnyOf))
		}
		e.t.appendChild(q, m)
	}
	return q
}

func (e *encoder) check(c *Check, own uint8) int32 {
	m := e.mapOf(own)
	e.t.set(m, "type", e.ident(c.Type))
	if c.Value != "" || c.Type != CheckQuality {
		e.t.set(m, "value", e.text(c.Value))
	}
	if c.Criteria != "" {
		e.t.set(m, "criteria", e.text(c.Criteria))
	}
	if len(c.Rubric) > 0 {
		q := e.t.newSeq()
		for _, r := range c.Rubric {
			rm := e.mapOf(ownCriterion)
			e.t.set(rm, "criterion", e.text(r.Criterion))
			if r.Description != "" {
				e.t.set(rm, "description", e.text(r.Description))
			}
			e.t.set(rm, "weight", e.float(r.Weight))
			if len(r.Levels) > 0 {
				lm := e.mapOf(ownAll)
				for _, l := range r.Levels {
					e.t.set(lm, strconv.Itoa(l.Score), e.text(l.Text))
				}
				e.t.set(rm, "levels", lm)
			}
			e.t.appendChild(q, rm)
		}
		e.t.set(m, "rubric", q)
	}
	if c.PassThreshold != nil {
		e.t.set(m, "pass_threshold", e.float(*c.PassThreshold))
	}
	if c.Scope != "" {
		e.t.set(m, "scope", e.text(c.Scope))
	}
	if c.Timeout != "" {
		e.t.set(m, "timeout", e.text(c.Timeout))
	}
	return m
}

func (e *encoder) control(c *Control) int32 {
	return e.fields(ownControl, controlFields, unsafe.Pointer(c))
}

func (e *encoder) atom(a *Atom) int32 { return e.fields(ownAtom, atomFields, unsafe.Pointer(a)) }

func (e *encoder) atoms(list []Atom) int32 {
	q := e.t.newSeq()
	for i := range list {
		e.t.appendChild(q, e.atom(&list[i]))
	}
	return q
}

func (e *encoder) decompositions(list []Decomposition) int32 {
	q := e.t.newSeq()
	for i := range list {
		e.t.appendChild(q, e.fields(ownDecomposition, decompositionFields, unsafe.Pointer(&list[i])))
	}
	return q
}

func (e *encoder) orGroup(g *ORGroup) int32 {
	return e.fields(ownORGroup, orGroupFields, unsafe.Pointer(g))
}

func (e *encoder) orGroups(list []ORGroup) int32 {
	m := e.mapOf(ownAll)
	for i := range list {
		e.t.set(m, list[i].Name, e.orGroup(&list[i]))
	}
	return m
}

func (e *encoder) binding(b *Binding) int32 {
	return e.fields(ownBinding, bindingFields, unsafe.Pointer(b))
}

func (e *encoder) bindings(list []Binding) int32 {
	m := e.mapOf(ownAll)
	for i := range list {
		e.t.set(m, list[i].AtomID, e.binding(&list[i]))
	}
	return m
}

func (e *encoder) trail(list []TrailEntry) int32 {
	q := e.t.newSeq()
	for i := range list {
		e.t.appendChild(q, e.fields(ownTrail, trailFields, unsafe.Pointer(&list[i])))
	}
	return q
}

func (e *encoder) corrections(list []Correction) int32 {
	q := e.t.newSeq()
	for i := range list {
		e.t.appendChild(q, e.fields(ownCorrection, correctionFields, unsafe.Pointer(&list[i])))
	}
	return q
}

// sectionNames lists the top-level sections in canonical order.
var sectionNames = []string{"objective", "control", "atoms", "decompositions", "or_groups", "bindings", "trail", "corrections"}

func (e *encoder) section(s *State, name string) int32 {
	switch name {
	case "objective":
		return e.objective(&s.Objective)
	case "control":
		return e.control(&s.Control)
	case "atoms":
		return e.atoms(s.Atoms)
	case "decompositions":
		return e.decompositions(s.Decompositions)
	case "or_groups":
		return e.orGroups(s.ORGroups)
	case "bindings":
		return e.bindings(s.Bindings)
	case "trail":
		return e.trail(s.Trail)
	case "corrections":
		return e.corrections(s.Corrections)
	}
	return e.null()
}
