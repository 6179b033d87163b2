package state

import (
	"errors"
	"unsafe"
)

// ReadValid returns the current state when it validates, else an
// *InvalidFileError. It reads as Read does, through the quick reader (see
// quick.go): the state is for reading only, and has no source file, so a
// write of it would not keep the file's layout.
func (st *Store) ReadValid() (*State, error) {
	data, err := st.read()
	if err != nil {
		return nil, err
	}
	s, _, errs, warns, err := st.parseQuick(data)
	if err != nil {
		return nil, err
	}
	if r := validate(s, errs, warns); !r.Valid() {
		return nil, &InvalidFileError{File: st.path, Issues: r.Errors}
	}
	return s, nil
}

// ReadReport returns the current state and its validation report, valid
// or not: for the commands that show a state as it is (aot state, aot
// status). It reads as ReadValid does, through the quick reader, so the
// state is for reading only; a large file is read without the node tree and
// the snapshot a write would need, which are most of Read's time and memory.
func (st *Store) ReadReport() (*State, Report, error) {
	data, err := st.read()
	if err != nil {
		return nil, Report{}, err
	}
	s, _, errs, warns, err := st.parseQuick(data)
	if err != nil {
		return nil, Report{}, err
	}
	return s, validate(s, errs, warns), nil
}

func (st *Store) parseQuick(data []byte) (*State, *quickDoc, []Issue, []Issue, error) {
	s, q, errs, warns, err := parseQuick(data)
	var pe *ParseError
	if errors.As(err, &pe) {
		pe.File = st.path
	}
	return s, q, errs, warns, err
}

// UpdateControl is Update, made for changes of the control section alone
// (the hooks' bookkeeping: iteration, stall count, status, stop reason): the
// file is read by the quick reader, and when fn changed nothing but control,
// only the control fields are checked (the rest of the file is as it was
// read, valid or not) and only their bytes are replaced, as Update would
// replace them, through the same atomic write. Any other change is checked
// and written as Update does it, with the file read again by the full
// reader under the same lock. fn runs once; it may replace an atom's or a
// binding's lists, but not write into them: such a change is not seen.
func (st *Store) UpdateControl(fn func(*State) error) (*State, error) {
	data, unlock, err := st.lockedRead()
	if err != nil {
		return nil, err
	}
	defer unlock()
	s, q, errs, warns, err := st.parseQuick(data)
	if err != nil {
		return nil, err
	}
	valid := false
	if st.refuseInvalid {
		if r := validate(s, errs, warns); !r.Valid() {
			return nil, &InvalidFileError{File: st.path, Issues: r.Errors}
		}
		valid = true
	}
	snap := s.snapshot()
	if err := fn(s); err != nil {
		return nil, err
	}
	if !onlyControl(snap, s) {
		return s, st.commitFull(s, data, valid)
	}
	if sectionSame(snap, s, "control") {
		return s, nil
	}
	if issues := controlIssues(&snap.Control, &s.Control, valid); len(issues) > 0 {
		return nil, &ValidationError{File: st.path, Issues: issues}
	}
	out, ok := q.patchControl(s)
	if !ok {
		return s, st.commitFull(s, data, valid)
	}
	return s, writeAtomic(st.path, out, st.guard, &st.written)
}

// commitFull checks and writes s, changed from data, as Update does.
func (st *Store) commitFull(s *State, data []byte, valid bool) error {
	full, err := st.parse(data)
	if err != nil {
		return err
	}
	CopyInto(full, s)
	return st.commit(full, data, valid, true)
}

// onlyControl reports whether s differs from snap in nothing but control.
func onlyControl(snap, s *State) bool {
	if s.Body != snap.Body {
		return false
	}
	for _, name := range sectionNames {
		if name != "control" && !sectionSame(snap, s, name) {
			return false
		}
	}
	return true
}

// controlIssues are the errors a change of control from old to cur adds,
// as Update finds them: every error when the file was valid, else only
// new ones; and an illegal transition of the loop's status.
func controlIssues(old, cur *Control, valid bool) []Issue {
	after := &validator{}
	after.control(cur)
	issues := after.r.Errors
	if !valid && len(issues) > 0 {
		before := &validator{}
		before.control(old)
		issues = newIssues(before.r.Errors, issues)
	}
	if old.Status != cur.Status && !controlTransitionOK(old.Status, cur.Status) {
		issues = append(issues, transitionIssues(&State{Control: *old}, &State{Control: *cur})...)
	}
	return issues
}

// patchControl renders the file with s's control section in place of the
// one read: the same bytes Update writes, as pieces that are mostly the
// file's own (a copy of a large file costs more than its write). ok is false
// when the quick reader cannot tell where the section is.
func (q *quickDoc) patchControl(s *State) (out [][]byte, ok bool) {
	if q == nil || !q.d.t.spans || q.d.t.nodes[q.d.root].kind != kMap {
		return nil, false
	}
	d := q.d
	k, v := d.t.mapGet(d.root, "control")
	if k == 0 || int(d.t.nodes[k].eend) > q.quickAt {
		return nil, false
	}
	kn := d.t.nodes[k]
	e := newEncoder()
	p := &patcher{old: d.t, new: e.t}
	p.value(v, e.section(s, "control"), int(kn.colon), 0, int(kn.eend), false)
	// The edits lie within the control section: patch it alone.
	start, end := int(kn.lstart), int(kn.eend)
	for i := range p.edits {
		p.edits[i].start -= start
		p.edits[i].end -= start
	}
	section := appendEdits(nil, d.fm[start:end], p.edits)
	return [][]byte{bytesOf(d.head), bytesOf(d.fm[:start]), section, bytesOf(d.fm[end:]), bytesOf(d.tail), bytesOf(s.Body)}, true
}

// bytesOf is the memory of s, to be written, never changed.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
