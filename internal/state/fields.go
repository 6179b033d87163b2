package state

import "unsafe"

// The schema's fields, one table per kind of record: a field's YAML key, its
// Go field, how it is written and what its absence means. The tree decoder,
// the encoder, the quick reader, the write-time comparison and the deep copy
// all walk these tables, so a new field of an atom, a binding, the control
// section, a decomposition, an OR group, a trail entry or a correction is one
// entry here (TestFieldTables fails for a struct field no table names).
//
// The objective and its base case keep their own code (decode.go,
// encode.go): nested checklists and rubrics are not flat records; the
// objective's constraints are a table.

// fieldKind is how a field's value is written and read.
type fieldKind uint8

const (
	fkIdent   fieldKind = iota // string: an identifier or enum value, plain when that reads back the same
	fkText                     // string: free text, always double-quoted
	fkInt                      // int
	fkBool                     // bool
	fkIdents                   // []string of identifiers, a flow list
	fkTexts                    // []string of free texts, a flow list
	fkOptBool                  // *bool: nil when absent
	fkOptText                  // *string: written as null when nil
	fkFloat                    // float64
	fkInt64                    // int64
)

// need is what reading a record without the field reports.
type need uint8

const (
	needNone  need = iota
	needError      // "required field is missing"
	needWarn       // a warning, the field's warn text
)

type field struct {
	name     string // the Go field, checked against the struct by the tests
	key      string // the YAML key
	kind     fieldKind
	need     need
	warn     string // the warning when absent (needWarn)
	omitZero bool   // left out of the file while zero (nil, "", 0, false or an empty list)
	notNil   bool   // a list read as [] when absent or null, never nil
	off      uintptr
}

// constraintsFields are the objective's constraints; the first three are the
// schema's and always written, the rest are AoT Loop extensions.
var constraintsFields = []field{
	{name: "MaxIterations", key: "max_iterations", kind: fkInt, off: unsafe.Offsetof(Constraints{}.MaxIterations)},
	{name: "MaxParallelAgents", key: "max_parallel_agents", kind: fkInt, off: unsafe.Offsetof(Constraints{}.MaxParallelAgents)},
	{name: "MaxStallCount", key: "max_stall_count", kind: fkInt, off: unsafe.Offsetof(Constraints{}.MaxStallCount)},
	{name: "MaxWallTime", key: "max_wall_time", kind: fkText, omitZero: true, off: unsafe.Offsetof(Constraints{}.MaxWallTime)},
	{name: "MaxCostUSD", key: "max_cost_usd", kind: fkFloat, omitZero: true, off: unsafe.Offsetof(Constraints{}.MaxCostUSD)},
	{name: "MaxTokens", key: "max_tokens", kind: fkInt64, omitZero: true, off: unsafe.Offsetof(Constraints{}.MaxTokens)},
	{name: "MaxAttemptsPerAtom", key: "max_attempts_per_atom", kind: fkInt, omitZero: true, off: unsafe.Offsetof(Constraints{}.MaxAttemptsPerAtom)},
}

var atomFields = []field{
	{name: "ID", key: "id", kind: fkIdent, need: needError, off: unsafe.Offsetof(Atom{}.ID)},
	{name: "Description", key: "description", kind: fkText, off: unsafe.Offsetof(Atom{}.Description)},
	{name: "Status", key: "status", kind: fkIdent, need: needError, off: unsafe.Offsetof(Atom{}.Status)},
	{name: "DependsOn", key: "depends_on", kind: fkIdents, need: needWarn, warn: "missing (read as [])", notNil: true, off: unsafe.Offsetof(Atom{}.DependsOn)},
	{name: "ORGroup", key: "or_group", kind: fkIdent, omitZero: true, off: unsafe.Offsetof(Atom{}.ORGroup)},
	{name: "Attempts", key: "attempts", kind: fkInt, omitZero: true, off: unsafe.Offsetof(Atom{}.Attempts)},
	{name: "LastFailure", key: "last_failure", kind: fkText, omitZero: true, off: unsafe.Offsetof(Atom{}.LastFailure)},
	{name: "Scope", key: "scope", kind: fkTexts, omitZero: true, off: unsafe.Offsetof(Atom{}.Scope)},
	{name: "ExpectChanges", key: "expect_changes", kind: fkOptBool, omitZero: true, off: unsafe.Offsetof(Atom{}.ExpectChanges)},
}

// bindingFields are a binding's fields; its atom id is the mapping's key.
var bindingFields = []field{
	{name: "Summary", key: "summary", kind: fkText, off: unsafe.Offsetof(Binding{}.Summary)},
	{name: "Artifacts", key: "artifacts", kind: fkTexts, notNil: true, off: unsafe.Offsetof(Binding{}.Artifacts)},
}

var controlFields = []field{
	{name: "Status", key: "status", kind: fkIdent, need: needError, off: unsafe.Offsetof(Control{}.Status)},
	{name: "Iteration", key: "iteration", kind: fkInt, need: needError, off: unsafe.Offsetof(Control{}.Iteration)},
	{name: "StallCount", key: "stall_count", kind: fkInt, need: needError, off: unsafe.Offsetof(Control{}.StallCount)},
	{name: "PrevPendingCount", key: "prev_pending_count", kind: fkInt, need: needError, off: unsafe.Offsetof(Control{}.PrevPendingCount)},
	{name: "StopRequested", key: "stop_requested", kind: fkBool, need: needError, off: unsafe.Offsetof(Control{}.StopRequested)},
	{name: "StopReason", key: "stop_reason", kind: fkOptText, off: unsafe.Offsetof(Control{}.StopReason)},
	{name: "RedirectRequested", key: "redirect_requested", kind: fkBool, need: needError, off: unsafe.Offsetof(Control{}.RedirectRequested)},
	{name: "LoopID", key: "loop_id", kind: fkIdent, omitZero: true, off: unsafe.Offsetof(Control{}.LoopID)},
}

var decompositionFields = []field{
	{name: "Parent", key: "parent", kind: fkIdent, off: unsafe.Offsetof(Decomposition{}.Parent)},
	{name: "Children", key: "children", kind: fkIdents, off: unsafe.Offsetof(Decomposition{}.Children)},
	{name: "Reason", key: "reason", kind: fkText, off: unsafe.Offsetof(Decomposition{}.Reason)},
}

// orGroupFields are an OR group's fields; its name is the mapping's key.
var orGroupFields = []field{
	{name: "Choices", key: "choices", kind: fkIdents, off: unsafe.Offsetof(ORGroup{}.Choices)},
	{name: "Selected", key: "selected", kind: fkIdent, off: unsafe.Offsetof(ORGroup{}.Selected)},
	{name: "Failed", key: "failed", kind: fkIdents, off: unsafe.Offsetof(ORGroup{}.Failed)},
	{name: "Speculative", key: "speculative", kind: fkBool, omitZero: true, off: unsafe.Offsetof(ORGroup{}.Speculative)},
}

var trailFields = []field{
	{name: "ORGroup", key: "or_group", kind: fkIdent, off: unsafe.Offsetof(TrailEntry{}.ORGroup)},
	{name: "Selected", key: "selected", kind: fkIdent, off: unsafe.Offsetof(TrailEntry{}.Selected)},
	{name: "Reason", key: "reason", kind: fkText, off: unsafe.Offsetof(TrailEntry{}.Reason)},
	{name: "Timestamp", key: "timestamp", kind: fkText, off: unsafe.Offsetof(TrailEntry{}.Timestamp)},
}

var correctionFields = []field{
	{name: "Timestamp", key: "timestamp", kind: fkText, off: unsafe.Offsetof(Correction{}.Timestamp)},
	{name: "Type", key: "type", kind: fkIdent, off: unsafe.Offsetof(Correction{}.Type)},
	{name: "Description", key: "description", kind: fkText, off: unsafe.Offsetof(Correction{}.Description)},
	{name: "TrailCleared", key: "trail_cleared", kind: fkBool, off: unsafe.Offsetof(Correction{}.TrailCleared)},
}

func (f *field) str(p unsafe.Pointer) *string    { return (*string)(unsafe.Add(p, f.off)) }
func (f *field) list(p unsafe.Pointer) *[]string { return (*[]string)(unsafe.Add(p, f.off)) }
func (f *field) num(p unsafe.Pointer) *int       { return (*int)(unsafe.Add(p, f.off)) }
func (f *field) flag(p unsafe.Pointer) *bool     { return (*bool)(unsafe.Add(p, f.off)) }
func (f *field) optFlag(p unsafe.Pointer) **bool { return (**bool)(unsafe.Add(p, f.off)) }
func (f *field) optStr(p unsafe.Pointer) **string {
	return (**string)(unsafe.Add(p, f.off))
}
func (f *field) float(p unsafe.Pointer) *float64 { return (*float64)(unsafe.Add(p, f.off)) }
func (f *field) num64(p unsafe.Pointer) *int64   { return (*int64)(unsafe.Add(p, f.off)) }

// keysOf lists a table's keys in the order aot writes them.
func keysOf(fields []field) []string {
	keys := make([]string, len(fields))
	for i := range fields {
		keys[i] = fields[i].key
	}
	return keys
}

// fieldIndex is the index of key in fields, or -1.
func fieldIndex(fields []field, key string) int {
	for i := range fields {
		if fields[i].key == key {
			return i
		}
	}
	return -1
}

// isZero reports whether the field of the record at p holds its zero value.
func (f *field) isZero(p unsafe.Pointer) bool {
	switch f.kind {
	case fkIdent, fkText:
		return *f.str(p) == ""
	case fkInt:
		return *f.num(p) == 0
	case fkBool:
		return !*f.flag(p)
	case fkIdents, fkTexts:
		return len(*f.list(p)) == 0
	case fkOptBool:
		return *f.optFlag(p) == nil
	case fkOptText:
		return *f.optStr(p) == nil
	case fkFloat:
		return *f.float(p) == 0
	case fkInt64:
		return *f.num64(p) == 0
	}
	return false
}

// sameFields reports whether the records at a and b hold the same values
// (nil and empty lists alike: both are written the same).
func sameFields(fields []field, a, b unsafe.Pointer) bool {
	for i := range fields {
		f := &fields[i]
		switch f.kind {
		case fkIdent, fkText:
			if *f.str(a) != *f.str(b) {
				return false
			}
		case fkInt:
			if *f.num(a) != *f.num(b) {
				return false
			}
		case fkBool:
			if *f.flag(a) != *f.flag(b) {
				return false
			}
		case fkIdents, fkTexts:
			if !stringsSame(*f.list(a), *f.list(b)) {
				return false
			}
		case fkOptBool:
			x, y := *f.optFlag(a), *f.optFlag(b)
			if (x == nil) != (y == nil) || x != nil && *x != *y {
				return false
			}
		case fkOptText:
			x, y := *f.optStr(a), *f.optStr(b)
			if (x == nil) != (y == nil) || x != nil && *x != *y {
				return false
			}
		case fkFloat:
			if *f.float(a) != *f.float(b) {
				return false
			}
		case fkInt64:
			if *f.num64(a) != *f.num64(b) {
				return false
			}
		}
	}
	return true
}

// deepenFields gives the record at p its own copies of the lists and
// pointers it shares with the record it was copied from (nil stays nil,
// empty stays empty).
func deepenFields(fields []field, p unsafe.Pointer) {
	for i := range fields {
		f := &fields[i]
		switch f.kind {
		case fkIdents, fkTexts:
			l := f.list(p)
			*l = copySlice(*l)
		case fkOptBool:
			if b := f.optFlag(p); *b != nil {
				v := **b
				*b = &v
			}
		case fkOptText:
			if s := f.optStr(p); *s != nil {
				v := **s
				*s = &v
			}
		}
	}
}

// encodeFields builds the mapping of the record at p.
func (e *encoder) fields(own uint8, fields []field, p unsafe.Pointer) int32 {
	m := e.mapOf(own)
	for i := range fields {
		f := &fields[i]
		if f.omitZero && f.isZero(p) {
			continue
		}
		var v int32
		switch f.kind {
		case fkIdent:
			v = e.ident(*f.str(p))
		case fkText:
			v = e.text(*f.str(p))
		case fkInt:
			v = e.integer(int64(*f.num(p)))
		case fkBool:
			v = e.boolean(*f.flag(p))
		case fkIdents:
			v = e.idents(*f.list(p))
		case fkTexts:
			v = e.texts(*f.list(p))
		case fkOptBool:
			v = e.boolean(**f.optFlag(p))
		case fkOptText:
			if s := *f.optStr(p); s != nil {
				v = e.text(*s)
			} else {
				v = e.null()
			}
		case fkFloat:
			v = e.float(*f.float(p))
		case fkInt64:
			v = e.integer(*f.num64(p))
		}
		e.t.set(m, f.key, v)
	}
	return m
}

// fields decodes the entries of mapping n into the record at p; base is the
// record's field path (such as "atoms[3]"), built into an issue's path only
// when there is an issue. Keys no table names are left alone. Absent fields
// are reported as their table entry says.
func (d *decoder) fields(fields []field, base string, n int32, p unsafe.Pointer) {
	var seen uint64
	next := 0 // the key expected next, in the order aot writes them
	d.each(n, func(key string, k, v int32) {
		i := next
		if i >= len(fields) || fields[i].key != key {
			if i = fieldIndex(fields, key); i < 0 {
				return
			}
		}
		next = i + 1
		seen |= 1 << i
		f := &fields[i]
		nd := &d.t.nodes[v]
		switch f.kind {
		case fkIdent, fkText:
			if nd.kind == kScalar && nd.tag != tNull {
				*f.str(p) = nd.val // the common case, without a path
			} else {
				*f.str(p) = d.str(base+"."+key, v)
			}
		case fkInt:
			*f.num(p) = d.integer(base+"."+key, v)
		case fkBool:
			*f.flag(p) = d.boolean(base+"."+key, v)
		case fkIdents, fkTexts:
			if d.cleanList(v) {
				*f.list(p) = d.strList("", v)
			} else {
				*f.list(p) = d.strList(base+"."+key, v)
			}
		case fkOptBool:
			b := d.boolean(base+"."+key, v)
			*f.optFlag(p) = &b
		case fkOptText:
			if !d.isNull(v) {
				s := d.str(base+"."+key, v)
				*f.optStr(p) = &s
			}
		case fkFloat:
			*f.float(p) = d.number(base+"."+key, v)
		case fkInt64:
			*f.num64(p) = int64(d.integer(base+"."+key, v))
		}
	})
	for i := range fields {
		f := &fields[i]
		if seen&(1<<i) == 0 {
			switch f.need {
			case needError:
				d.errorf(base+"."+f.key, n, "required field is missing")
			case needWarn:
				d.warnf(base+"."+f.key, n, "%s", f.warn)
			}
		}
		if f.notNil && (f.kind == fkIdents || f.kind == fkTexts) && *f.list(p) == nil {
			*f.list(p) = []string{}
		}
	}
}

// quickField reads v, the rest of a "key: value" line in the layout aot
// writes, into the field of the record at p; false when v is in another
// layout (the general reader then reads the section).
func (f *field) quick(v string, p unsafe.Pointer, lists *arena) bool {
	var ok bool
	switch f.kind {
	case fkIdent, fkText:
		*f.str(p), ok = quickScalar(v)
	case fkInt:
		var n int
		if n, ok = quickInt(v); ok {
			*f.num(p) = n
		}
	case fkBool:
		*f.flag(p), ok = quickBool(v)
	case fkIdents, fkTexts:
		*f.list(p), ok = lists.list(v)
	case fkOptBool:
		var b bool
		if b, ok = quickBool(v); ok {
			*f.optFlag(p) = &b
		}
	}
	return ok
}

// leadingWritten is how many of the table's first fields aot always writes.
func leadingWritten(fields []field) int {
	n := 0
	for n < len(fields) && !fields[n].omitZero {
		n++
	}
	return n
}
