package state

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The quick reader and UpdateControl (quick.go, control.go) must give what
// Parse, Validate and Update give, on every input: the files of testdata,
// the benchmark's, and random states in aot's layout and edited by hand.

// quickInputs are the files the quick reader is checked on.
func quickInputs(t *testing.T) map[string][]byte {
	t.Helper()
	in := map[string][]byte{"mini": []byte(miniState), "bench-100": Marshal(benchState(100))}
	for _, pattern := range []string{"testdata/*.md", "testdata/tricky/*.md"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			in[name] = readFixture(t, strings.TrimPrefix(name, "testdata/"))
		}
	}
	// The control section after the atoms: its bytes move when they are
	// read quickly, so it is patched by the full reader.
	bench := string(Marshal(benchState(20)))
	control := bench[strings.Index(bench, "control:\n"):strings.Index(bench, "atoms:\n")]
	bench = strings.Replace(bench, control, "", 1)
	in["control-last"] = []byte(strings.Replace(bench, "\n---\n", "\n"+control+"---\n", 1))
	rng := rand.New(rand.NewPCG(10, 15))
	for i := range 300 {
		data := Marshal(randomState(rng))
		if i%3 != 0 {
			data = handEdit(rng, data, 1+rng.IntN(4))
		}
		in["random-"+strconv.Itoa(i)] = data
	}
	return in
}

// checkQuick fails t unless parseQuick reads data as Parse and Validate do;
// it reports whether the quick reader did the work.
func checkQuick(t *testing.T, data []byte) (quick bool) {
	t.Helper()
	want, werr := Parse(data)
	got, q, errs, warns, gerr := parseQuick(data)
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
		t.Fatalf("errors differ: Parse %v, quick %v\n%s", werr, gerr, data)
	}
	if werr != nil {
		return false
	}
	wantReport := Validate(want)
	want.doc = nil
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("the readers disagree (-Parse +quick):\n%s\n%s", diffStates(want, got), data)
	}
	if diff := cmp.Diff(wantReport, validate(got, errs, warns)); diff != "" {
		t.Fatalf("the reports differ (-Parse +quick):\n%s\n%s", diff, data)
	}
	return q != nil
}

func TestQuickReaderReadsAsParse(t *testing.T) {
	quick := 0
	inputs := quickInputs(t)
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			if checkQuick(t, data) {
				quick++
			}
		})
	}
	// Most inputs must take the quick path, or the test proves little.
	t.Logf("the quick reader read %d of %d inputs", quick, len(inputs))
	if quick < len(inputs)/3 {
		t.Errorf("the quick reader read only %d of %d inputs", quick, len(inputs))
	}
}

// controlChanges are changes made through Update and UpdateControl alike.
var controlChanges = map[string]func(*State) error{
	"iteration": func(s *State) error { s.Control.Iteration++; return nil },
	"stall": func(s *State) error {
		s.Control.StallCount, s.Control.PrevPendingCount = s.Control.StallCount+1, 7
		return nil
	},
	"stop": func(s *State) error {
		r := `stall: 3 stops "in a row" # without progress`
		s.Control.Status, s.Control.StopReason = ControlStopped, &r
		return nil
	},
	"clear reason":       func(s *State) error { s.Control.StopReason = nil; return nil },
	"negative (refused)": func(s *State) error { s.Control.Iteration = -1; return nil },
	"back to pending":    func(s *State) error { s.Control.Status = ControlPending; return nil },
	"unknown status":     func(s *State) error { s.Control.Status = "paused"; return nil },
	"nothing":            func(s *State) error { return nil },
	"fn fails":           func(s *State) error { s.Control.Iteration++; return errors.New("no") },
	"an atom too": func(s *State) error {
		s.Control.Iteration++
		if len(s.Atoms) > 0 {
			s.Atoms[0].Status = StatusInProgress
		}
		return nil
	},
	"a binding too": func(s *State) error {
		s.Control.Iteration++
		if len(s.Atoms) > 0 {
			s.SetBinding(Binding{AtomID: s.Atoms[0].ID, Summary: "done", Artifacts: []string{"a.go"}})
		}
		return nil
	},
	"a list replaced": func(s *State) error {
		if len(s.Atoms) > 0 {
			s.Atoms[len(s.Atoms)-1].Scope = []string{"x/**"}
		}
		return nil
	},
}

// checkUpdateControl fails t unless UpdateControl(fn) leaves the file as
// Update(fn) does, with the same error; a refused change leaves it
// byte-identical and no temp file behind.
func checkUpdateControl(t *testing.T, data []byte, refuse bool, fn func(*State) error) {
	t.Helper()
	var paths [2]string
	var errs [2]error
	for i := range paths {
		paths[i] = filepath.Join(t.TempDir(), "state.md")
		if err := os.WriteFile(paths[i], data, 0o644); err != nil {
			t.Fatal(err)
		}
		st := NewStore(paths[i])
		if refuse {
			st.RefuseInvalid()
		}
		if i == 0 {
			_, errs[i] = st.Update(fn)
		} else {
			_, errs[i] = st.UpdateControl(fn)
		}
	}
	msg := func(i int) string {
		if errs[i] == nil {
			return ""
		}
		return strings.ReplaceAll(errs[i].Error(), paths[i], "STATE")
	}
	if msg(0) != msg(1) {
		t.Fatalf("errors differ:\nUpdate:        %s\nUpdateControl: %s", msg(0), msg(1))
	}
	var out [2][]byte
	for i, p := range paths {
		var err error
		if out[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(filepath.Dir(p))
		for _, e := range entries {
			if e.Name() != "state.md" && e.Name() != "state.md.lock" {
				t.Errorf("left behind %s", e.Name())
			}
		}
	}
	if diff := cmp.Diff(string(out[0]), string(out[1])); diff != "" {
		t.Fatalf("the files differ (-Update +UpdateControl):\n%s", diff)
	}
	if errs[1] != nil && string(out[1]) != string(data) {
		t.Fatalf("a refused change altered the file")
	}
}

func TestUpdateControlWritesWhatUpdateWrites(t *testing.T) {
	inputs := quickInputs(t)
	names := make([]string, 0, len(controlChanges))
	for name := range controlChanges {
		names = append(names, name)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse(data); err != nil {
				return
			}
			// Every change on the fixtures, two at random on the others.
			changes := names
			if strings.HasPrefix(name, "random-") {
				changes = []string{names[rng.IntN(len(names))], names[rng.IntN(len(names))]}
			}
			for _, c := range changes {
				for _, refuse := range []bool{false, true} {
					t.Run(c+map[bool]string{true: ",refuse-invalid"}[refuse], func(t *testing.T) {
						checkUpdateControl(t, data, refuse, controlChanges[c])
					})
				}
			}
		})
	}
}

func TestUpdateControlRewritesOnlyControlLines(t *testing.T) {
	data := Marshal(benchState(1000))
	st := writeState(t, string(data))
	if _, err := st.RefuseInvalid().UpdateControl(controlChanges["stop"]); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	got := changedLines(string(data), string(out))
	want := []string{"  status: stopped", `  stop_reason: "stall: 3 stops \"in a row\" # without progress"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changed lines (-want +got):\n%s", diff)
	}
}

// randomState builds a state of a few atoms with every field the contract
// has, with values that need quoting, and sometimes errors.
func randomState(rng *rand.Rand) *State {
	texts := []string{"plain words", `a "quoted" word`, "colon: inside", "hash # inside", "", "ünïcödé", "tab\tinside",
		"two\nlines", "  padded  ", "-dash", "[bracket]", "yes", "null", "123", "'single'", `back\slash`, "{brace}"}
	ids := []string{"A", "x-1", "a.b", "123", "yes", "null", "A 1", "é", "B_2", "n", "-x", "a:b"}
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	n := 1 + rng.IntN(12)
	atoms := make([]Atom, n)
	idList := make([]string, n)
	for i := range atoms {
		id := "A" + strconv.Itoa(i+1)
		if rng.IntN(4) == 0 {
			id = pick(ids) + strconv.Itoa(i)
		}
		if rng.IntN(20) == 0 && i > 0 {
			id = idList[0] // a duplicate
		}
		idList[i] = id
		a := Atom{ID: id, Description: pick(texts), Status: []string{StatusPending, StatusInProgress, StatusResolved, "weird"}[rng.IntN(4)], DependsOn: []string{}}
		for k := 0; k < rng.IntN(3) && i > 0; k++ {
			a.DependsOn = append(a.DependsOn, idList[rng.IntN(i)])
		}
		if rng.IntN(15) == 0 {
			a.DependsOn = append(a.DependsOn, "ghost")
		}
		if rng.IntN(5) == 0 {
			a.Attempts = rng.IntN(5) - 1
			a.LastFailure = pick(texts)
		}
		if rng.IntN(5) == 0 {
			a.Scope = []string{"internal/**", pick(texts)}
		}
		if rng.IntN(6) == 0 {
			a.ORGroup = "g"
		}
		atoms[i] = a
	}
	s := New(Objective{Goal: pick(texts), BaseCase: &BaseCase{Legacy: &Check{Type: CheckCommand, Value: "go test ./..."}},
		BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "done"}, atoms, pick(texts))
	s.ORGroups = []ORGroup{{Name: "g", Choices: []string{idList[0]}, Selected: idList[0], Failed: []string{}}}
	if rng.IntN(3) == 0 {
		s.Decompositions = []Decomposition{{Parent: idList[0], Children: []string{idList[n-1]}, Reason: pick(texts)}}
	}
	for i := range atoms {
		if rng.IntN(2) == 0 {
			arts := []string{}
			for k := 0; k < rng.IntN(3); k++ {
				arts = append(arts, pick(texts))
			}
			s.SetBinding(Binding{AtomID: idList[i], Summary: pick(texts), Artifacts: arts})
		}
	}
	s.Control = Control{Status: []string{ControlPending, ControlRunning, ControlStopped, ControlCompleted}[rng.IntN(4)],
		Iteration: rng.IntN(9), StallCount: rng.IntN(3), PrevPendingCount: rng.IntN(5) - 1, StopRequested: rng.IntN(4) == 0}
	if rng.IntN(3) == 0 {
		r := pick(texts)
		s.Control.StopReason = &r
	}
	return s
}

// handEdit changes k random lines of the frontmatter the way people and
// other tools do, and sometimes breaks it.
func handEdit(rng *rand.Rand, data []byte, k int) []byte {
	lines := strings.Split(string(data), "\n")
	end := 1
	for end < len(lines) && lines[end] != "---" {
		end++
	}
	for range k {
		if end < 3 {
			break
		}
		i := 1 + rng.IntN(end-1)
		l := lines[i]
		switch rng.IntN(11) {
		case 0:
			lines[i] = l + "  # a comment"
		case 1:
			lines[i] = l + "\n"
		case 2:
			lines[i] = "# a comment\n" + l
		case 3:
			lines[i] = "  " + l
		case 4:
			lines[i] = strings.ReplaceAll(l, `"`, "'")
		case 5:
			lines[i] = strings.Replace(l, ": ", ":   ", 1)
		case 6:
			lines[i] = l + "\n" + l
		case 7:
			lines[i] = ""
		case 8:
			if i+1 < end {
				lines[i], lines[i+1] = lines[i+1], l
			}
		case 9:
			lines[i] = strings.ReplaceAll(strings.ReplaceAll(l, `"`, ""), "[]", "[ ]")
		case 10:
			lines[i] = strings.Replace(l, ": ", ": &x ", 1)
		}
	}
	return []byte(strings.Join(lines, "\n"))
}

// ReadReport is what aot state and aot status show: it must give the state
// and the report Read and Validate give, valid or not, and the same errors.
func TestReadReportIsReadAndValidate(t *testing.T) {
	inputs := quickInputs(t)
	inputs["not yaml"] = []byte("---\natoms: [\n---\n")
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.md")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			st := NewStore(path)
			want, werr := st.Read()
			got, report, gerr := st.ReadReport()
			if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
				t.Fatalf("errors differ: Read %v, ReadReport %v", werr, gerr)
			}
			if werr != nil {
				return
			}
			wantReport := Validate(want)
			want.doc = nil
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("the states differ (-Read +ReadReport):\n%s", diffStates(want, got))
			}
			if diff := cmp.Diff(wantReport, report); diff != "" {
				t.Fatalf("the reports differ (-Validate +ReadReport):\n%s", diff)
			}
		})
	}
	_, _, err := NewStore(filepath.Join(t.TempDir(), "none.md")).ReadReport()
	if !errors.Is(err, ErrNotExist) {
		t.Errorf("a missing file: err = %v, want ErrNotExist", err)
	}
}
