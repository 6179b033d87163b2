package journal

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Journals written by the engine before its events were typed (commit
// af68a27): recorded-* from the testscripts' real runs, one line per type and
// set of data keys; shapes-* the other writers' shapes, written from their
// code. Every line reads as its typed payload, with no key the payload does
// not know and no value of another type, and is written back byte for byte.
func TestOldJournalsReadAndWriteBack(t *testing.T) {
	files, err := filepath.Glob("testdata/*.ndjson")
	if err != nil || len(files) < 2 {
		t.Fatalf("old journals: %v %v", files, err)
	}
	seen := map[string]bool{}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		events, skipped, err := Scan(path)
		if err != nil || len(skipped) > 0 {
			t.Fatalf("%s: %v %v", path, skipped, err)
		}
		lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
		if len(lines) != len(events) {
			t.Fatalf("%s: %d lines, %d events", path, len(lines), len(events))
		}
		for i, ev := range events {
			seen[ev.Type] = true
			again := ev
			if _, typed := kinds[ev.Type]; typed {
				p, err := ev.Decode()
				if err != nil {
					t.Fatalf("%s:%d: %v", path, i+1, err)
				}
				strictDecode(t, ev, reflect.TypeOf(p))
				if slow := viaJSON(ev, reflect.TypeOf(p)); !cmp.Equal(p, slow) {
					t.Errorf("%s:%d: read directly %+v, through JSON %+v", path, i+1, p, slow)
				}
				again = ev.With(p)
			} else if len(ev.Data) > 0 {
				t.Errorf("%s:%d: a %s event with data %v and no payload type", path, i+1, ev.Type, ev.Data)
			}
			got, err := json.Marshal(again)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, lines[i]) {
				t.Errorf("%s:%d: written back differently\n got %s\nwant %s", path, i+1, got, lines[i])
			}
		}
	}
	for typ := range kinds {
		if !seen[typ] {
			t.Errorf("no old journal line of type %s", typ)
		}
	}
}

// viaJSON reads ev's data as a typ through JSON, as DataOf does when it
// cannot read a value directly.
func viaJSON(ev Event, typ reflect.Type) Payload {
	b, _ := json.Marshal(ev.Data)
	p := reflect.New(typ)
	_ = json.Unmarshal(b, p.Interface())
	present(p.Elem(), ev.Data)
	return p.Elem().Interface().(Payload)
}

// strictDecode fails when the event's data has a key the payload type does
// not know, or a value of another type.
func strictDecode(t *testing.T, ev Event, typ reflect.Type) {
	t.Helper()
	b, err := json.Marshal(ev.Data)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(reflect.New(typ).Interface()); err != nil {
		t.Errorf("%s %s: %v", ev.Type, b, err)
	}
}

// Every payload, each field set, is written with the keys docs/JOURNAL.md
// lists for its type and reads back equal.
func TestPayloadRoundTrip(t *testing.T) {
	doc, err := os.ReadFile("../../docs/JOURNAL.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := documentedKeys(string(doc))
	for typ, read := range kinds {
		t.Run(typ, func(t *testing.T) {
			want := read(Event{}) // the zero payload of the type
			v := reflect.New(reflect.TypeOf(want)).Elem()
			fill(v)
			want = v.Interface().(Payload)
			if fieldsOf(v.Type()) == nil {
				t.Fatalf("%T is not flat, each field with a json key: nothing of it would be written", want)
			}
			if want.EventType() != typ {
				t.Fatalf("a %T is a %s event, filed under %s", want, want.EventType(), typ)
			}
			ev := Event{Time: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), Atom: "A"}.With(want)
			line, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			var back Event
			if err := json.Unmarshal(line, &back); err != nil {
				t.Fatal(err)
			}
			if back.Type != typ {
				t.Fatalf("type %q, want %q", back.Type, typ)
			}
			var keys []string
			for k := range back.Data {
				keys = append(keys, k)
				if !slices.Contains(rows[typ], k) {
					t.Errorf("key %q of %s is not in docs/JOURNAL.md's row for it (%v)", k, typ, rows[typ])
				}
			}
			if tags := jsonKeys(reflect.TypeOf(want)); !cmp.Equal(sorted(keys), sorted(tags)) {
				t.Errorf("keys written %v, fields %v", sorted(keys), sorted(tags))
			}
			got, err := back.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("read back (-written +read):\n%s", diff)
			}
			// In memory too (the engine replays, a Temporal workflow keeps
			// its events): the data as the writer gave it reads the same.
			if mem, _ := ev.Decode(); !cmp.Equal(want, mem) {
				t.Errorf("read in memory: %s", cmp.Diff(want, mem))
			}
		})
	}
}

// documentedKeys reads the Types table of docs/JOURNAL.md: for each type,
// the words in backquotes of its data column.
func documentedKeys(doc string) map[string][]string {
	out := map[string][]string{}
	tick := regexp.MustCompile("`([a-z_]+)")
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		var words []string
		for _, m := range tick.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			words = append(words, m[1])
		}
		for _, m := range tick.FindAllStringSubmatch(cells[0], -1) {
			out[m[1]] = append(out[m[1]], words...)
		}
	}
	return out
}

func jsonKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	return keys
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// fill sets every field of v to a value that is not zero (a list of
// lists of the same type, as a checklist's groups, one level deep).
func fill(v reflect.Value) { fillTo(v, 0) }

func fillTo(v reflect.Value, depth int) {
	if depth > 4 {
		return
	}
	fill := func(v reflect.Value) { fillTo(v, depth+1) }
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		if depth > 2 {
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.25)
	}
}

// A token count reads as the engine sums: saturating, never negative, and a
// field that is not a number is left zero while the others read.
func TestCountSaturates(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want Count
	}{
		{`{"input_tokens":1500,"output_tokens":1}`, 1500},
		{`{"input_tokens":9223372036854775807,"output_tokens":1}`, 9223372036854775807},
		{`{"input_tokens":1e300,"output_tokens":1}`, 9223372036854775807},
		{`{"input_tokens":-5,"output_tokens":1}`, 0},
		{`{"input_tokens":12.7,"output_tokens":1}`, 12},
		{`{"input_tokens":"many","output_tokens":1}`, 0},
		{`{"input_tokens":1e30,"output_tokens":1}`, 9223372036854775807},
		{`{"input_tokens":-1e30,"output_tokens":1}`, 0},
	} {
		line := `{"time":"2026-11-25T10:00:00Z","type":"atom_finish","data":` + tt.raw + "}"
		ev, err := decodeLine([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		d := DataOf[AtomFinishData](ev)
		if d.InputTokens == nil || *d.InputTokens != tt.want || d.OutputTokens == nil || *d.OutputTokens != 1 {
			t.Errorf("%s: input %v output %v, want %d and 1", tt.raw, d.InputTokens, d.OutputTokens, tt.want)
		}
	}
}

// A hand-edited line with values of other types reads as JSON reads it: the
// fields that fit, the others zero.
func TestDataOfWrongTypes(t *testing.T) {
	for _, data := range []string{
		`{"kind":5,"summary":"kept","artifacts":["a",3],"files":1.5,"input_tokens":"many","output_tokens":2}`,
		`{"summary":["x"],"artifacts":"a","usage_unknown":"yes","check":null,"proposed":1e3}`,
		`{"Summary":"other case","KIND":"crash"}`,
	} {
		ev, err := decodeLine([]byte(`{"time":"2026-11-25T10:00:00Z","type":"atom_finish","data":` + data + `}`))
		if err != nil {
			t.Fatal(err)
		}
		got, want := DataOf[AtomFinishData](ev), viaJSON(ev, reflect.TypeFor[AtomFinishData]())
		if diff := cmp.Diff(want, Payload(got)); diff != "" {
			t.Errorf("%s (-through JSON +read):\n%s", data, diff)
		}
	}
	if d := DataOf[AtomFinishData](Event{Data: map[string]any{"summary": "kept", "kind": 5}}); d.Summary != "kept" || d.Kind != "" {
		t.Errorf("read %+v, want the summary and no kind", d)
	}
}

// A key written null when none (a redirect that stopped nothing) stays so,
// read in memory or from its line, and written again.
func TestNullListStaysNull(t *testing.T) {
	var none []string
	ev := Event{Time: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), OK: Bool(true)}.With(RedirectData{Stopped: &none})
	want := `{"time":"2026-11-25T10:00:00Z","type":"redirect","ok":true,"data":{"stopped":null}}`
	line, _ := json.Marshal(ev)
	if string(line) != want {
		t.Fatalf("written %s, want %s", line, want)
	}
	fromLine, err := decodeLine(line)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Event{ev, fromLine} {
		again, _ := json.Marshal(Event{Time: e.Time, OK: e.OK}.With(DataOf[RedirectData](e)))
		if string(again) != want {
			t.Errorf("written again %s, want %s", again, want)
		}
	}
}
