package state

import (
	"fmt"
	"strconv"
	"unsafe"
)

// Issue is one problem found in a state file, named by field and line.
type Issue struct {
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

func (i Issue) String() string {
	s := i.Message
	if i.Field != "" {
		s = i.Field + ": " + s
	}
	if i.Line > 0 {
		s = fmt.Sprintf("line %d: %s", i.Line, s)
	}
	return s
}

// key identifies an issue independently of where it sits, so that a change
// that only moves lines is not taken for a change that adds a problem.
func (i Issue) key() string { return i.Field + "\x00" + i.Message }

type decoder struct {
	t        *tree
	errors   []Issue
	warnings []Issue
}

func (d *decoder) errorf(field string, n int32, format string, args ...any) {
	d.errors = append(d.errors, Issue{Field: field, Line: int(d.t.nodes[n].line), Message: fmt.Sprintf(format, args...)})
}

func (d *decoder) warnf(field string, n int32, format string, args ...any) {
	d.warnings = append(d.warnings, Issue{Field: field, Line: int(d.t.nodes[n].line), Message: fmt.Sprintf(format, args...)})
}

func (d *decoder) isNull(n int32) bool {
	return n == 0 || d.t.nodes[n].kind == kScalar && d.t.nodes[n].tag == tNull
}

func (d *decoder) str(field string, n int32) string {
	if d.isNull(n) {
		return ""
	}
	if d.t.nodes[n].kind != kScalar {
		d.errorf(field, n, "must be a string")
		return ""
	}
	return d.t.nodes[n].val
}

func (d *decoder) integer(field string, n int32) int {
	if d.isNull(n) {
		return 0
	}
	nd := d.t.nodes[n]
	if nd.kind != kScalar || nd.tag != tInt {
		d.errorf(field, n, "must be an integer, not %s", d.describe(n))
		return 0
	}
	v, err := strconv.ParseInt(nd.val, 10, 64)
	if err != nil || v != int64(int(v)) {
		d.errorf(field, n, "integer %s is out of range", nd.val)
		return 0
	}
	return int(v)
}

func (d *decoder) number(field string, n int32) float64 {
	nd := d.t.nodes[n]
	if nd.kind != kScalar || nd.tag != tInt && nd.tag != tFloat {
		d.errorf(field, n, "must be a number, not %s", d.describe(n))
		return 0
	}
	v, err := strconv.ParseFloat(nd.val, 64)
	if err != nil {
		d.errorf(field, n, "must be a number, not %s", d.describe(n))
	}
	return v
}

func (d *decoder) boolean(field string, n int32) bool {
	if d.isNull(n) {
		return false
	}
	nd := d.t.nodes[n]
	if nd.kind != kScalar || nd.tag != tBool {
		d.errorf(field, n, "must be true or false, not %s", d.describe(n))
		return false
	}
	return nd.val == "true" || nd.val == "True" || nd.val == "TRUE"
}

func (d *decoder) describe(n int32) string {
	nd := d.t.nodes[n]
	if d.isNull(n) {
		return "null" // however it is spelled: "", ~ or null
	}
	switch nd.kind {
	case kMap:
		return "a mapping"
	case kSeq:
		return "a list"
	}
	return strconv.Quote(nd.val)
}

// strList reads a list of strings; a single scalar is refused.
func (d *decoder) strList(field string, n int32) []string {
	if d.isNull(n) {
		return nil
	}
	if d.t.nodes[n].kind != kSeq {
		d.errorf(field, n, "must be a list, not %s", d.describe(n))
		return nil
	}
	var out []string
	i := 0
	for c := d.t.nodes[n].first; c != 0; c = d.t.nodes[c].next {
		if d.t.nodes[c].kind == kScalar && !d.isNull(c) {
			out = append(out, d.t.nodes[c].val) // the common case: no path needed
		} else {
			out = append(out, d.str(field+"["+strconv.Itoa(i)+"]", c))
		}
		i++
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// strKey is str of field base+key, building that path only for an error:
// a state of 100,000 atoms has a million fields.
func (d *decoder) strKey(base, key string, n int32) string {
	if d.t.nodes[n].kind == kScalar && !d.isNull(n) {
		return d.t.nodes[n].val
	}
	return d.str(base+key, n)
}

// cleanList reports whether n is a list of non-null scalars, which strList
// reads without a field path.
func (d *decoder) cleanList(n int32) bool {
	if d.t.nodes[n].kind != kSeq {
		return false
	}
	for c := d.t.nodes[n].first; c != 0; c = d.t.nodes[c].next {
		if d.t.nodes[c].kind != kScalar || d.isNull(c) {
			return false
		}
	}
	return true
}

// each calls fn for every key and value of map n.
func (d *decoder) each(n int32, fn func(key string, k, v int32)) {
	for k := d.t.nodes[n].first; k != 0; {
		v := d.t.nodes[k].next
		fn(d.t.nodes[k].val, k, v)
		k = d.t.nodes[v].next
	}
}

func (d *decoder) isMap(field string, n int32) bool {
	if d.t.nodes[n].kind != kMap {
		d.errorf(field, n, "must be a mapping, not %s", d.describe(n))
		return false
	}
	return true
}

func (d *decoder) decode(root int32) *State {
	s := &State{}
	if !d.isMap("frontmatter", root) {
		return s
	}
	seen := map[string]bool{}
	d.each(root, func(key string, k, v int32) {
		seen[key] = true
		switch key {
		case "objective":
			d.objective(&s.Objective, v)
		case "control":
			d.control(&s.Control, v)
		case "atoms":
			d.atoms(s, v)
		case "decompositions":
			d.decompositions(s, v)
		case "or_groups":
			d.orGroups(s, v)
		case "bindings":
			d.bindings(s, v)
		case "trail":
			d.trail(s, v)
		case "corrections":
			d.corrections(s, v)
		}
	})
	for _, sec := range []string{"objective", "control", "atoms"} {
		if !seen[sec] {
			d.errors = append(d.errors, Issue{Field: sec, Message: "required section is missing"})
		}
	}
	for _, sec := range []string{"bindings", "trail", "corrections"} {
		if !seen[sec] {
			d.warnings = append(d.warnings, Issue{Field: sec, Message: "section is missing (read as empty)"})
		}
	}
	return s
}

func (d *decoder) objective(o *Objective, n int32) {
	if !d.isMap("objective", n) {
		return
	}
	seen := map[string]bool{}
	d.each(n, func(key string, k, v int32) {
		seen[key] = true
		f := "objective." + key
		switch key {
		case "goal":
			o.Goal = d.str(f, v)
		case "background_intent":
			o.BackgroundIntent = d.str(f, v)
		case "deliverables":
			o.Deliverables = d.str(f, v)
		case "definition_of_done":
			o.DefinitionOfDone = d.str(f, v)
		case "base_case":
			if !d.isNull(v) {
				o.BaseCase = d.baseCase(v)
			}
		case "constraints":
			d.constraints(&o.Constraints, v)
		}
	})
	for _, f := range []string{"goal", "base_case"} {
		if !seen[f] {
			d.errorf("objective."+f, n, "required field is missing")
		}
	}
	for _, f := range []string{"background_intent", "deliverables", "definition_of_done"} {
		if !seen[f] {
			d.warnf("objective."+f, n, "field is missing")
		}
	}
	if !seen["constraints"] {
		o.Constraints = Constraints{MaxIterations: DefaultMaxIterations, MaxParallelAgents: DefaultMaxParallelAgents, MaxStallCount: DefaultMaxStallCount}
		d.warnf("objective.constraints", n, "missing; using defaults %d/%d/%d", DefaultMaxIterations, DefaultMaxParallelAgents, DefaultMaxStallCount)
	}
}

func (d *decoder) constraints(c *Constraints, n int32) {
	c.MaxIterations, c.MaxParallelAgents, c.MaxStallCount = DefaultMaxIterations, DefaultMaxParallelAgents, DefaultMaxStallCount
	if d.isNull(n) || !d.isMap("objective.constraints", n) {
		return
	}
	d.fields(constraintsFields, "objective.constraints", n, unsafe.Pointer(c))
}

func (d *decoder) baseCase(n int32) *BaseCase {
	b := &BaseCase{}
	if !d.isMap("objective.base_case", n) {
		return b
	}
	if _, v := d.t.mapGet(n, "checklist"); v != 0 {
		b.HasChecklist = true
		b.Checklist = d.checklist("objective.base_case.checklist", v)
		return b
	}
	c := d.check("objective.base_case", n)
	b.Legacy = &c
	return b
}

func (d *decoder) checklist(field string, n int32) []ChecklistItem {
	if d.isNull(n) {
		return nil
	}
	if d.t.nodes[n].kind != kSeq {
		d.errorf(field, n, "must be a list, not %s", d.describe(n))
		return nil
	}
	var out []ChecklistItem
	i := 0
	for c := d.t.nodes[n].first; c != 0; c = d.t.nodes[c].next {
		f := field + "[" + strconv.Itoa(i) + "]"
		i++
		it := ChecklistItem{Line: int(d.t.nodes[c].line)}
		if !d.isMap(f, c) {
			out = append(out, it)
			continue
		}
		d.each(c, func(key string, k, v int32) {
			switch key {
			case "item":
				it.Item = d.strKey(f, ".item", v)
			case "check":
				if d.isMap(f+".check", v) {
					ck := d.check(f+".check", v)
					it.Check = &ck
				}
			case "group":
				it.HasGroup = true
				it.Group = d.checklist(f+".group", v)
			case "any_of":
				it.HasAnyOf = true
				it.AnyOf = d.checklist(f+".any_of", v)
			}
		})
		out = append(out, it)
	}
	return out
}

func (d *decoder) check(field string, n int32) Check {
	c := Check{Line: int(d.t.nodes[n].line)}
	d.each(n, func(key string, k, v int32) {
		f := field + "." + key
		switch key {
		case "type":
			c.Type = d.str(f, v)
		case "value":
			c.Value = d.str(f, v)
		case "criteria":
			c.Criteria = d.str(f, v)
		case "scope":
			c.Scope = d.str(f, v)
		case "timeout":
			c.Timeout = d.str(f, v)
		case "pass_threshold":
			if !d.isNull(v) {
				x := d.number(f, v)
				c.PassThreshold = &x
			}
		case "rubric":
			c.Rubric = d.rubric(f, v)
		}
	})
	return c
}

func (d *decoder) rubric(field string, n int32) []RubricCriterion {
	if d.isNull(n) {
		return nil
	}
	if d.t.nodes[n].kind != kSeq {
		d.errorf(field, n, "must be a list, not %s", d.describe(n))
		return nil
	}
	var out []RubricCriterion
	i := 0
	for c := d.t.nodes[n].first; c != 0; c = d.t.nodes[c].next {
		f := field + "[" + strconv.Itoa(i) + "]"
		i++
		var r RubricCriterion
		if d.isMap(f, c) {
			d.each(c, func(key string, k, v int32) {
				switch key {
				case "criterion":
					r.Criterion = d.strKey(f, ".criterion", v)
				case "description":
					r.Description = d.strKey(f, ".description", v)
				case "weight":
					r.Weight = d.number(f+".weight", v)
				case "levels":
					if d.isMap(f+".levels", v) {
						d.each(v, func(lk string, kk, lv int32) {
							score, err := strconv.Atoi(lk)
							if err != nil {
								d.errorf(f+".levels", kk, "level %q must be an integer score", lk)
								return
							}
							r.Levels = append(r.Levels, RubricLevel{Score: score, Text: d.str(f+".levels."+lk, lv)})
						})
					}
				}
			})
		}
		out = append(out, r)
	}
	return out
}

func (d *decoder) control(c *Control, n int32) {
	if !d.isMap("control", n) {
		return
	}
	d.fields(controlFields, "control", n, unsafe.Pointer(c))
}

// list calls fn for each item of the list section n, with the item's field
// path; a section that is not a list is an error.
func (d *decoder) list(section string, n int32, fn func(f string, c int32)) {
	if d.isNull(n) {
		return
	}
	if d.t.nodes[n].kind != kSeq {
		d.errorf(section, n, "must be a list, not %s", d.describe(n))
		return
	}
	i := 0
	for c := d.t.nodes[n].first; c != 0; c = d.t.nodes[c].next {
		fn(section+"["+strconv.Itoa(i)+"]", c)
		i++
	}
}

func (d *decoder) atoms(s *State, n int32) {
	if !d.isNull(n) && d.t.nodes[n].kind == kSeq {
		count := 0
		for c := d.t.nodes[n].first; c != 0; c = d.t.nodes[c].next {
			count++
		}
		s.Atoms = make([]Atom, 0, count)
	}
	d.list("atoms", n, func(f string, c int32) {
		s.Atoms = append(s.Atoms, Atom{Line: int(d.t.nodes[c].line), DependsOn: []string{}})
		if d.isMap(f, c) {
			d.fields(atomFields, f, c, unsafe.Pointer(&s.Atoms[len(s.Atoms)-1]))
		}
	})
}

func (d *decoder) decompositions(s *State, n int32) {
	d.list("decompositions", n, func(f string, c int32) {
		dc := Decomposition{Line: int(d.t.nodes[c].line)}
		if d.isMap(f, c) {
			d.fields(decompositionFields, f, c, unsafe.Pointer(&dc))
		}
		s.Decompositions = append(s.Decompositions, dc)
	})
}

func (d *decoder) orGroups(s *State, n int32) {
	if d.isNull(n) || !d.isMap("or_groups", n) {
		return
	}
	d.each(n, func(name string, k, v int32) {
		f := "or_groups." + name
		g := ORGroup{Name: name, Line: int(d.t.nodes[k].line)}
		if d.isMap(f, v) {
			d.fields(orGroupFields, f, v, unsafe.Pointer(&g))
		}
		s.ORGroups = append(s.ORGroups, g)
	})
}

func (d *decoder) bindings(s *State, n int32) {
	if d.isNull(n) || !d.isMap("bindings", n) {
		return
	}
	d.each(n, func(id string, k, v int32) {
		f := "bindings." + id
		b := Binding{AtomID: id, Line: int(d.t.nodes[k].line), Artifacts: []string{}}
		if !d.isNull(v) && d.isMap(f, v) {
			d.fields(bindingFields, f, v, unsafe.Pointer(&b))
		}
		s.Bindings = append(s.Bindings, b)
	})
}

func (d *decoder) trail(s *State, n int32) {
	d.list("trail", n, func(f string, c int32) {
		var e TrailEntry
		if d.isMap(f, c) {
			d.fields(trailFields, f, c, unsafe.Pointer(&e))
		}
		s.Trail = append(s.Trail, e)
	})
}

func (d *decoder) corrections(s *State, n int32) {
	d.list("corrections", n, func(f string, c int32) {
		var e Correction
		if d.isMap(f, c) {
			d.fields(correctionFields, f, c, unsafe.Pointer(&e))
		}
		s.Corrections = append(s.Corrections, e)
	})
}
