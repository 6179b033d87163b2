package journal

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
)

// Payload is the data of one kind of event (events.go). Its fields are the
// keys of the event's data object, spelled by their json tags: a field
// without omitempty is always written; one with omitempty is left out when
// zero, but a list only when nil (an empty list is written []); a pointer
// field is a key written even when zero or null, when the pointer is set.
// Payload types are flat: every field has a json key of its own.
//
// Event.Data stays the envelope every event travels in (the journal's lines,
// aot status --json, the API, a Temporal workflow's status): writers fill it
// with Event.With, readers take it out with DataOf or Decode, and neither
// touches the map.
type Payload interface {
	EventType() string
}

// With returns e with p's kind as its type and p as its data.
func (e Event) With(p Payload) Event {
	e.Type = p.EventType()
	e.Data = dataOf(p)
	return e
}

// DataOf returns the data of e as a T. A field the event does not have, or
// has with another type (a hand edit, an older version), is left zero, as
// the other fields are still read: a reader never fails on one event.
func DataOf[T Payload](e Event) T {
	var p T
	if len(e.Data) == 0 {
		return p
	}
	v := reflect.ValueOf(&p).Elem()
	if !direct(v, e.Data) {
		p = dataOfJSON[T](e)
	}
	present(v, e.Data)
	return p
}

// dataOfJSON reads e's data as a T through JSON: what DataOf does for a
// value direct does not take (a nested object, a number of another type).
func dataOfJSON[T Payload](e Event) T {
	var p T
	if b, err := json.Marshal(e.Data); err == nil {
		_ = json.Unmarshal(b, &p) // a field of another type is skipped, the others read
	}
	return p
}

// direct sets v's fields from data without going through JSON, for what
// a decoded line (strings, bools, float64, lists of strings) or a writer
// (the field's own type) holds; false when a value needs JSON. A status
// reads every atom_finish of a journal: this is 10x quicker.
func direct(v reflect.Value, data map[string]any) bool {
	fs := fieldsOf(v.Type())
	if fs == nil {
		return false
	}
	matched := 0
	for i, f := range fs {
		if x, ok := data[f.key]; ok {
			if !setDirect(v.Field(i), x) {
				return false
			}
			matched++
		}
	}
	return matched == len(data) // a key of another spelling ("Kind") is JSON's to match
}

var countType = reflect.TypeFor[Count]()

// field is a payload field's key, and whether it is left out when empty.
type field struct {
	key       string
	omitEmpty bool
}

// fields holds each payload type's fields, in order.
var fields sync.Map // reflect.Type -> []field

// fieldsOf returns t's fields, nil when one of them has no json key of its
// own (an embedded or unexported field): payload types are flat, each field
// tagged.
func fieldsOf(t reflect.Type) []field {
	if fs, ok := fields.Load(t); ok {
		return fs.([]field)
	}
	fs := make([]field, t.NumField())
	for i := range fs {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || !f.IsExported() || name == "" || name == "-" {
			fs = nil
			break
		}
		fs[i] = field{key: name, omitEmpty: strings.Contains(opts, "omitempty")}
	}
	fields.Store(t, fs)
	return fs
}

func setDirect(f reflect.Value, x any) bool {
	if x == nil {
		return true // null leaves a field as it is, as in JSON
	}
	if f.Kind() == reflect.Pointer {
		n := reflect.New(f.Type().Elem())
		if !setDirect(n.Elem(), x) {
			return false
		}
		f.Set(n)
		return true
	}
	switch xv := reflect.ValueOf(x); {
	case xv.Type() == f.Type() && f.Kind() != reflect.Slice && f.Kind() != reflect.Map:
		f.Set(xv)
		return true
	case f.Type() == countType:
		n, ok := x.(float64)
		if ok {
			f.SetInt(int64(countOf(n)))
		}
		return ok
	}
	switch f.Kind() {
	case reflect.String:
		s, ok := x.(string)
		f.SetString(s)
		return ok
	case reflect.Bool:
		b, ok := x.(bool)
		f.SetBool(b)
		return ok
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, ok := x.(float64)
		if !ok || n != math.Trunc(n) || f.OverflowInt(int64(n)) || math.Abs(n) > 1<<53 {
			return false
		}
		f.SetInt(int64(n))
		return true
	case reflect.Float64:
		n, ok := x.(float64)
		f.SetFloat(n)
		return ok
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String || f.Type().Elem() != reflect.TypeFor[string]() {
			return false
		}
		var list []string
		switch l := x.(type) {
		case []string:
			if l != nil { // a nil list stays nil: written back null
				list = append([]string{}, l...)
			}
		case []any:
			list = make([]string, len(l))
			for i, e := range l {
				s, ok := e.(string)
				if !ok {
					return false
				}
				list[i] = s
			}
		default:
			return false
		}
		f.Set(reflect.ValueOf(list))
		return true
	}
	return false
}

// present sets the pointer fields whose key the data holds, even as null,
// so that a key written null ("stopped": null) is written back.
func present(v reflect.Value, data map[string]any) {
	for i, f := range fieldsOf(v.Type()) {
		if fv := v.Field(i); fv.Kind() == reflect.Pointer && fv.IsNil() {
			if _, ok := data[f.key]; ok {
				fv.Set(reflect.New(fv.Type().Elem()))
			}
		}
	}
}

// kinds reads the payload of every event type that carries data.
var kinds = map[string]func(Event) Payload{
	RunStart: decoder[RunStartData], RunResume: decoder[RunResumeData],
	AtomStart: decoder[AtomStartData], AtomFinish: decoder[AtomFinishData], AtomReset: decoder[AtomResetData],
	ORSwitch: decoder[ORSwitchData], Decompose: decoder[DecomposeData], AddAtom: decoder[AddAtomData],
	ParentDone: decoder[ParentDoneData], Verify: decoder[VerifyData], Iteration: decoder[IterationData],
	Stall: decoder[StallData], Redirect: decoder[RedirectData], Stop: decoder[StopData],
	Checkpoint: decoder[CheckpointData], Backoff: decoder[BackoffData], QuotaWait: decoder[QuotaWaitData],
	Confirm: decoder[ConfirmData], RateLimit: decoder[RateLimitData],
	Process: decoder[ProcessData], HandEdit: decoder[HandEditData], Workspace: decoder[WorkspaceData],
	Worktree: decoder[WorktreeData], Merge: decoder[MergeData], Pause: decoder[PauseData], Resume: decoder[ResumeData],
	UsageRefused: decoder[UsageRefusedData], JournalLost: decoder[JournalLostData],
	PermissionDenied: decoder[PermissionDeniedData], AttemptRetry: decoder[AttemptRetryData],
	SessionUsage: decoder[SessionUsageData],
}

func decoder[T Payload](e Event) Payload { return DataOf[T](e) }

// Decode returns the event's data as the payload of its type (an
// AtomFinishData for an atom_finish, ...). An event type that carries no
// data (or one this version does not know) is an error.
func (e Event) Decode() (Payload, error) {
	f, ok := kinds[e.Type]
	if !ok {
		return nil, fmt.Errorf("journal: a %q event carries no data this version reads", e.Type)
	}
	return f(e), nil
}

// dataOf is p's fields as a data object, each value as the field holds it
// (so that what is written is what the writer gave; a pointer's value),
// empty omitempty fields left out; nil when nothing is left.
func dataOf(p Payload) map[string]any {
	v := reflect.Indirect(reflect.ValueOf(p))
	m := map[string]any{}
	for i, f := range fieldsOf(v.Type()) {
		fv := v.Field(i)
		if f.omitEmpty && empty(fv) {
			continue
		}
		if fv.Kind() == reflect.Pointer && !fv.IsNil() {
			fv = fv.Elem() // the value, as readers in memory expect it
		}
		m[f.key] = fv.Interface()
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// empty is encoding/json's omitempty test, but for one thing: a slice or
// map is empty only when nil, so that a list written empty ([]) reads back
// empty, and a list left out reads back nil.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.IsNil()
	case reflect.Array, reflect.String:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return v.IsZero()
}
