package state

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// record is one field table and the struct it describes.
type record struct {
	name   string
	fields []field
	own    uint8
	typ    reflect.Type
	keyed  []string // struct fields that are not fields of the file's record (its line, its mapping key)
	of     func(*State) any
}

var records = []record{
	{"constraints", constraintsFields, ownConstraints, reflect.TypeFor[Constraints](), nil, func(s *State) any { return &s.Objective.Constraints }},
	{"atom", atomFields, ownAtom, reflect.TypeFor[Atom](), []string{"Line"}, func(s *State) any { return &s.Atoms[0] }},
	{"binding", bindingFields, ownBinding, reflect.TypeFor[Binding](), []string{"AtomID", "Line"}, func(s *State) any { return &s.Bindings[0] }},
	{"control", controlFields, ownControl, reflect.TypeFor[Control](), nil, func(s *State) any { return &s.Control }},
	{"decomposition", decompositionFields, ownDecomposition, reflect.TypeFor[Decomposition](), []string{"Line"}, func(s *State) any { return &s.Decompositions[0] }},
	{"OR group", orGroupFields, ownORGroup, reflect.TypeFor[ORGroup](), []string{"Name", "Line"}, func(s *State) any { return &s.ORGroups[0] }},
	{"trail entry", trailFields, ownTrail, reflect.TypeFor[TrailEntry](), nil, func(s *State) any { return &s.Trail[0] }},
	{"correction", correctionFields, ownCorrection, reflect.TypeFor[Correction](), nil, func(s *State) any { return &s.Corrections[0] }},
}

// goTypeOf is the Go type each kind of field must have.
var goTypeOf = map[fieldKind]reflect.Type{
	fkIdent:   reflect.TypeFor[string](),
	fkText:    reflect.TypeFor[string](),
	fkInt:     reflect.TypeFor[int](),
	fkBool:    reflect.TypeFor[bool](),
	fkIdents:  reflect.TypeFor[[]string](),
	fkTexts:   reflect.TypeFor[[]string](),
	fkOptBool: reflect.TypeFor[*bool](),
	fkOptText: reflect.TypeFor[*string](),
	fkFloat:   reflect.TypeFor[float64](),
	fkInt64:   reflect.TypeFor[int64](),
}

// tableProblems lists what is wrong with a field table for typ: a struct
// field no entry names, an entry naming no field or the wrong offset or
// type, a key used twice.
func tableProblems(typ reflect.Type, fields []field, keyed []string) []string {
	var out []string
	named := map[string]bool{}
	keys := map[string]bool{}
	for _, f := range fields {
		sf, ok := typ.FieldByName(f.name)
		switch {
		case !ok:
			out = append(out, f.key+": no field "+f.name)
		case sf.Offset != f.off:
			out = append(out, f.key+": the offset is not that of "+f.name)
		case sf.Type != goTypeOf[f.kind]:
			out = append(out, f.key+": "+f.name+" is a "+sf.Type.String()+", not a "+goTypeOf[f.kind].String())
		}
		if keys[f.key] {
			out = append(out, f.key+": key used twice")
		}
		named[f.name], keys[f.key] = true, true
	}
	for i := range typ.NumField() {
		sf := typ.Field(i)
		if sf.IsExported() && !named[sf.Name] && !slices.Contains(keyed, sf.Name) {
			out = append(out, sf.Name+": in the struct, missing from the table")
		}
	}
	return out
}

// TestFieldTables checks that every field of every record is in its table,
// with its own offset and a kind of its Go type: a field added to a struct
// and not to the table fails here.
func TestFieldTables(t *testing.T) {
	for _, r := range records {
		if p := tableProblems(r.typ, r.fields, r.keyed); len(p) > 0 {
			t.Errorf("%s table: %s", r.name, strings.Join(p, "; "))
		}
		if got := ownedKeys[r.own]; !slices.Equal(got, keysOf(r.fields)) {
			t.Errorf("%s: a write owns keys %v, the table has %v", r.name, got, keysOf(r.fields))
		}
	}
	// The check itself catches a missing entry and a wrong one.
	if p := tableProblems(reflect.TypeFor[Atom](), atomFields[:len(atomFields)-1], []string{"Line"}); len(p) != 1 || !strings.HasPrefix(p[0], "ExpectChanges:") {
		t.Errorf("an atom table without expect_changes: problems %q, want ExpectChanges missing", p)
	}
	wrong := slices.Clone(controlFields)
	wrong[1].off = wrong[2].off
	wrong[3].kind = fkBool
	if p := tableProblems(reflect.TypeFor[Control](), wrong, nil); len(p) != 2 {
		t.Errorf("a control table with a wrong offset and kind: problems %q, want 2", p)
	}
}

// fieldsState has one record of each kind with every field at its zero
// value, but for what New sets.
func fieldsState() *State {
	s := New(Objective{Goal: "g", BaseCase: &BaseCase{Legacy: &Check{Type: CheckFile, Value: "done.txt"}}},
		[]Atom{{ID: "A1", Description: "first"}, {ID: "A2", Description: "second", DependsOn: []string{"A1"}}}, "Do it.")
	s.Bindings = []Binding{{AtomID: "A1", Artifacts: []string{}}}
	s.Decompositions = []Decomposition{{}}
	s.ORGroups = []ORGroup{{Name: "g1"}}
	s.Trail = []TrailEntry{{}}
	s.Corrections = []Correction{{}}
	return s
}

// fieldValues are values each kind of field is set to in turn, each unlike
// the zero value and chosen to need quoting or escaping where a kind can.
func fieldValues(k fieldKind) []reflect.Value {
	f, t := false, true
	why := "stopped by hand: \"enough\" # not a comment"
	switch k {
	case fkIdent:
		return []reflect.Value{reflect.ValueOf("B_2"), reflect.ValueOf("in_progress")}
	case fkText:
		return []reflect.Value{reflect.ValueOf("line one\nline two: \"quoted\" # hash"), reflect.ValueOf("plain")}
	case fkInt:
		return []reflect.Value{reflect.ValueOf(7), reflect.ValueOf(-3)}
	case fkBool:
		return []reflect.Value{reflect.ValueOf(true)}
	case fkIdents:
		return []reflect.Value{reflect.ValueOf([]string{"A1", "x.y-z"}), reflect.ValueOf([]string{"only"})}
	case fkTexts:
		return []reflect.Value{reflect.ValueOf([]string{"a b.go", "c, d \"e\""}), reflect.ValueOf([]string{"one.go"})}
	case fkOptBool:
		return []reflect.Value{reflect.ValueOf(&f), reflect.ValueOf(&t)}
	case fkOptText:
		return []reflect.Value{reflect.ValueOf(&why)}
	case fkFloat:
		return []reflect.Value{reflect.ValueOf(2.5), reflect.ValueOf(12.0)}
	case fkInt64:
		return []reflect.Value{reflect.ValueOf(int64(123456789012)), reflect.ValueOf(int64(-1))}
	}
	return nil
}

// TestEveryFieldRoundTrips sets every field of every table in turn (through
// reflection, not the table) and checks that the write-time comparison and
// Equal see the change, that each reader (the fast scanner, the YAML
// library, the quick reader) reads back what was written, both for a new
// file and for a patch of a file read before, and that the patch is the
// canonical file line for line.
func TestEveryFieldRoundTrips(t *testing.T) {
	base := fieldsState()
	baseFile := Marshal(base)
	for _, r := range records {
		for _, f := range r.fields {
			for vi, v := range fieldValues(f.kind) {
				name := r.name + "." + f.key
				want := fieldsState()
				rec := r.of(want)
				reflect.ValueOf(rec).Elem().FieldByName(f.name).Set(v)
				// The comparisons see the change.
				if Equal(base, want) {
					t.Errorf("%s=%v: Equal misses the change", name, v)
				}
				if sameFields(r.fields, reflect.ValueOf(r.of(base)).UnsafePointer(), reflect.ValueOf(rec).UnsafePointer()) {
					t.Errorf("%s=%v: sameFields misses the change", name, v)
				}
				file := Marshal(want)
				if !strings.Contains(string(file), f.key+":") {
					t.Errorf("%s: not written:\n%s", name, file)
				}
				// A patch of the file read before writes the same lines. (A
				// key added at the end of a section goes after the blank
				// line that ends it, as it always has: "control:" gains
				// its loop_id so.)
				old, err := Parse(baseFile)
				if err != nil {
					t.Fatal(err)
				}
				reflect.ValueOf(r.of(old)).Elem().FieldByName(f.name).Set(v)
				noBlank := func(b []byte) string { return strings.ReplaceAll(string(b), "\n\n", "\n") }
				patched := Marshal(old)
				if noBlank(patched) != noBlank(file) {
					t.Errorf("%s=%v: the patch differs from the canonical file:\n%s\nwant\n%s", name, v, patched, file)
				}
				if again, err := Parse(patched); err != nil || !Equal(again, want) {
					t.Errorf("%s=%v: the patch reads back otherwise (%v)", name, v, err)
				}
				readers := map[string]func([]byte) (*State, error){
					"fast": func(b []byte) (*State, error) {
						s, err := Parse(b)
						if err == nil && !s.doc.t.spans {
							t.Errorf("%s: the fast scanner gave the file up", name)
						}
						if errs, _ := s.readIssues(); err == nil && len(errs) > 0 {
							t.Errorf("%s: read with errors %v", name, errs)
						}
						return s, err
					},
					"library": func(b []byte) (*State, error) { return parseWith(b, libraryTree) },
					"quick": func(b []byte) (*State, error) {
						s, q, errs, _, err := parseQuick(b)
						if err == nil && (q == nil || !strings.Contains(q.mini, "atoms: []") || !strings.Contains(q.mini, "bindings: {}")) {
							t.Errorf("%s: the quick reader left the atoms or bindings to the general one", name)
						}
						if len(errs) > 0 {
							t.Errorf("%s: quick read with errors %v", name, errs)
						}
						return s, err
					},
				}
				for rn, read := range readers {
					got, err := read(file)
					if err != nil {
						t.Errorf("%s=%v, %s reader: %v", name, v, rn, err)
						continue
					}
					if !Equal(got, want) {
						t.Errorf("%s (value %d), %s reader:\n%s", name, vi, rn, diffStates(want, got))
					}
					if got := reflect.ValueOf(r.of(got)).Elem().FieldByName(f.name); !reflect.DeepEqual(got.Interface(), v.Interface()) {
						t.Errorf("%s, %s reader: read %v, wrote %v", name, rn, got, v)
					}
				}
			}
		}
	}
}

// TestFieldPointers keeps the table's accessors honest beside reflection.
func TestFieldPointers(t *testing.T) {
	s := fieldsState()
	for _, r := range records {
		rec := reflect.ValueOf(r.of(s))
		for i := range r.fields {
			f := &r.fields[i]
			want := rec.Elem().FieldByName(f.name).Addr().UnsafePointer()
			if got := unsafe.Add(rec.UnsafePointer(), f.off); got != want {
				t.Errorf("%s.%s: the table points elsewhere", r.name, f.key)
			}
		}
	}
}
