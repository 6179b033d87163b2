package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/state"
)

// filled sets every field of v, however deep, to a value other than its
// zero: a string is the atom id A1 (maps are keyed by it), a time is a
// fixed moment, numbers count up so that no two fields hold the same.
func filled(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("A1")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		filled(t, v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		filled(t, v.Index(0), n)
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		filled(t, k, n)
		filled(t, e, n)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(*n) * time.Minute)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				filled(t, v.Field(i), n)
			}
		}
	default:
		t.Fatalf("filled: no value for a %s; teach it one", v.Type())
	}
}

// Every piece of the engine's bookkeeping crosses a Continue-As-New: a
// Carry with every field set comes back the same from JSON and from a new
// Core, so a field added to Carry cannot be lost on the way.
func TestCarryCrossesWhole(t *testing.T) {
	var want Carry
	n := 0
	filled(t, reflect.ValueOf(&want).Elem(), &n)

	data, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var back Carry
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, back); d != "" {
		t.Fatalf("through JSON (-want +got):\n%s", d)
	}

	// A1 is an executable atom, so that its backoff is kept.
	s := state.New(state.Objective{Goal: "g", BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "true"}}},
		[]state.Atom{{ID: "A1", Description: "one"}}, "g")
	h := &script{t: t, now: want.Start}
	h.c = NewCore(s, CoreOptions{Carry: &back}, h)
	if d := cmp.Diff(want, h.c.Carry()); d != "" {
		t.Fatalf("through a Core (-want +got):\n%s", d)
	}
}

// The JSON of a Carry is in recorded workflow histories (Continue-As-New
// inputs): its names stay what they were, in the same order, so that what
// an older aot handed over still decodes.
func TestCarryKeepsItsJSONNames(t *testing.T) {
	var c Carry
	n := 0
	filled(t, reflect.ValueOf(&c).Elem(), &n)
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var names []string
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"usage", "unknown", "start", "paused_for", "start_iteration", "paused", "next", "notes", "planned",
		"waiting", "reopens", "repairs", "expands", "quota_until", "rate_until", "rate_in_row", "rate_cap", "attempted",
		"sweep_start", "sweep_reported", "sweep_repair", "gen", "dep_gen", "verified_gen", "verify_fails",
		"max_parallel", "max_iterations"}
	if !slices.Equal(names, want) {
		t.Errorf("Carry's JSON names changed:\n got %q\nwant %q", names, want)
	}
	// And an empty Carry still leaves out what it left out.
	empty, _ := json.Marshal(Carry{})
	if got := string(empty); got != `{"usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0},"start":"0001-01-01T00:00:00Z","quota_until":"0001-01-01T00:00:00Z","rate_until":"0001-01-01T00:00:00Z","sweep_start":0,"dep_gen":0,"verified_gen":0}` {
		t.Errorf("an empty Carry encodes as %s", got)
	}
}
