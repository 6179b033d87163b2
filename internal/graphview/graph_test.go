package graphview

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aot-loop/aot/internal/state"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// load reads a state file of testdata/.
func load(t testing.TB, name string) *state.State {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := state.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if r := state.Validate(s); !r.Valid() {
		t.Fatalf("%s does not validate: %v", name, r.Errors)
	}
	return s
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", name, diff)
	}
}

// TestBuild: the roles of the atoms of a graph with a failed OR choice, a
// selected one, one not taken, an open decomposition and mixed statuses.
func TestBuild(t *testing.T) {
	g := Build(load(t, "work.md"), Options{})
	type role struct {
		Status                              string
		Executable, Selected, Failed, Faded bool
		Critical                            bool
		Parent                              string
	}
	got := map[string]role{}
	for _, n := range g.Nodes {
		got[n.ID] = role{n.Status, n.Executable, n.Selected, n.Failed, n.Faded(), n.Critical, n.Parent}
	}
	want := map[string]role{
		"A1": {Status: "resolved"},
		"A2": {Status: "in_progress"},
		"B1": {Status: "pending", Failed: true},
		"B2": {Status: "pending", Executable: true, Selected: true, Critical: true},
		"B3": {Status: "pending", Faded: true},
		"C1": {Status: "pending", Critical: true},
		"D":  {Status: "pending"},
		"D1": {Status: "resolved", Parent: "D"},
		"D2": {Status: "pending", Executable: true, Parent: "D"},
		"E":  {Status: "pending", Critical: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"B2", "C1", "E"}, g.CriticalPath); diff != "" {
		t.Errorf("critical path (-want +got):\n%s", diff)
	}
	var edges []string
	for _, e := range g.Edges {
		s := e.From + " " + e.Kind + " " + e.To
		if e.Critical {
			s += " critical"
		}
		edges = append(edges, s)
	}
	wantEdges := []string{
		"A1 depends A2", "A1 depends B1", "A1 depends B2", "A1 depends B3",
		"B2 or C1 critical", // C1 names B1; the group's selected B2 satisfies it
		"A1 depends D", "D decomposes D1", "D decomposes D2", "A1 depends D1", "A1 depends D2",
		"C1 depends E critical", "D depends E", "A2 depends E",
	}
	if diff := cmp.Diff(wantEdges, edges); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
	wantGroup := Group{ID: "build", Choices: []string{"B1", "B2", "B3"}, Selected: "B2", Failed: []string{"B1"}}
	got0 := g.Groups[0]
	got0.X, got0.Y, got0.W, got0.H = 0, 0, 0, 0
	if diff := cmp.Diff(wantGroup, got0); diff != "" {
		t.Errorf("group (-want +got):\n%s", diff)
	}
	if g.Omitted != 0 || g.Note != "" {
		t.Errorf("omitted %d, note %q; want everything shown", g.Omitted, g.Note)
	}
	// Dependencies point forward: every edge goes to a later layer, and
	// no two nodes overlap.
	at := map[string]Node{}
	for _, n := range g.Nodes {
		at[n.ID] = n
	}
	for _, e := range g.Edges {
		if at[e.From].Layer >= at[e.To].Layer {
			t.Errorf("edge %s -> %s goes from layer %d to %d", e.From, e.To, at[e.From].Layer, at[e.To].Layer)
		}
	}
	for i, a := range g.Nodes {
		for _, b := range g.Nodes[i+1:] {
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Errorf("%s and %s overlap", a.ID, b.ID)
			}
		}
	}
}

// TestTrailFailure: a file that kept only the trail (no failed list) still
// shows the choice the loop backtracked from as failed, until it is
// selected again.
func TestTrailFailure(t *testing.T) {
	s := load(t, "work.md")
	s.ORGroups[0].Failed = nil
	if g := Build(s, Options{}); !node(g, "B1").Failed {
		t.Error("B1 is not failed; the trail says B1 failed")
	}
	s.Trail = append(s.Trail, state.TrailEntry{ORGroup: "build", Selected: "B1", Reason: "make is back"})
	s.ORGroups[0].Selected = "B1"
	if g := Build(s, Options{}); node(g, "B1").Failed || !node(g, "B1").Selected {
		t.Error("B1 selected again is still failed")
	}
}

func node(g *Graph, id string) Node {
	for _, n := range g.Nodes {
		if n.ID == id {
			return n
		}
	}
	return Node{}
}

// TestCriticalPath: the rule on small graphs.
func TestCriticalPath(t *testing.T) {
	atom := func(id, status string, deps ...string) state.Atom {
		return state.Atom{ID: id, Description: id, Status: status, DependsOn: deps}
	}
	const p, r, w = state.StatusPending, state.StatusResolved, state.StatusInProgress
	tests := []struct {
		name   string
		atoms  []state.Atom
		groups []state.ORGroup
		decomp []state.Decomposition
		want   []string
	}{
		{"empty", nil, nil, nil, []string{}},
		{"all resolved", []state.Atom{atom("A", r), atom("B", r, "A")}, nil, nil, []string{}},
		{"a chain without its resolved head", []state.Atom{atom("A", r), atom("B", w, "A"), atom("C", p, "B")}, nil, nil, []string{"B", "C"}},
		{"the longer branch", []state.Atom{atom("A", p), atom("B", p, "A"), atom("X", p), atom("C", p, "B"), atom("D", p, "X")}, nil, nil, []string{"A", "B", "C"}},
		{"ties go to the first in the file", []state.Atom{atom("X", p), atom("A", p), atom("Y", p, "X"), atom("B", p, "A")}, nil, nil, []string{"X", "Y"}},
		{"an unselected choice never bounds completion",
			[]state.Atom{{ID: "O1", Status: p, ORGroup: "g"}, {ID: "O2", Status: p, ORGroup: "g", DependsOn: []string{}}, atom("Z", p, "O1"), atom("Q", p, "O2")},
			[]state.ORGroup{{Name: "g", Choices: []string{"O1", "O2"}, Selected: "O2"}}, nil, []string{"O2", "Z"}},
		{"an open parent waits for its children and weighs nothing",
			[]state.Atom{atom("P", p), atom("C1", p), atom("C2", p, "C1"), atom("Z", p, "P")},
			nil, []state.Decomposition{{Parent: "P", Children: []string{"C1", "C2"}}}, []string{"C1", "C2", "P", "Z"}},
		{"a cycle is left out", []state.Atom{atom("A", p, "B"), atom("B", p, "A"), atom("C", p)}, nil, nil, []string{"C"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &state.State{Atoms: tt.atoms, ORGroups: tt.groups, Decompositions: tt.decomp}
			if diff := cmp.Diff(tt.want, Build(s, Options{}).CriticalPath); diff != "" {
				t.Errorf("critical path (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCap: over the cap the critical path, the work in progress and what
// can start are kept, and the rest is counted.
func TestCap(t *testing.T) {
	s := layered(2000)
	g := Build(s, Options{MaxNodes: 120})
	if len(g.Nodes) != 120 || g.Omitted != len(s.Atoms)-120 {
		t.Fatalf("%d nodes shown, %d omitted; want 120 and %d", len(g.Nodes), g.Omitted, len(s.Atoms)-120)
	}
	if !strings.HasPrefix(g.Note, "+"+strconv.Itoa(g.Omitted)+" more atoms not shown (") {
		t.Errorf("note %q", g.Note)
	}
	shown := map[string]bool{}
	for _, n := range g.Nodes {
		shown[n.ID] = true
	}
	for _, id := range g.CriticalPath {
		if !shown[id] {
			t.Errorf("critical atom %s not shown", id)
		}
	}
	for _, e := range g.Edges {
		if !shown[e.From] || !shown[e.To] {
			t.Errorf("edge %s -> %s to a node not shown", e.From, e.To)
		}
	}
	if all := Build(s, Options{MaxNodes: -1}); len(all.Nodes) != len(s.Atoms) || all.Omitted != 0 {
		t.Errorf("uncapped: %d nodes, %d omitted", len(all.Nodes), all.Omitted)
	}
}

// render is every format, as aot graph names them.
var render = map[string]func(io.Writer, *Graph) error{
	"mmd": Mermaid,
	"dot": DOT,
	"svg": SVG,
	"json": func(w io.Writer, g *Graph) error {
		data, err := json.MarshalIndent(g, "", "  ")
		if err == nil {
			_, err = w.Write(append(data, '\n'))
		}
		return err
	},
}

// TestGolden: each format of the sample graph, byte for byte.
func TestGolden(t *testing.T) {
	g := Build(load(t, "work.md"), Options{})
	for ext, f := range render {
		t.Run(ext, func(t *testing.T) {
			var buf bytes.Buffer
			if err := f(&buf, g); err != nil {
				t.Fatal(err)
			}
			golden(t, "work."+ext, buf.Bytes())
		})
	}
}

// hostile is a description that breaks every format that does not escape.
const hostile = "Say \"hi\" <script>alert('x')</script> & &amp; #35; %% c\n\r\x00\x01\x7f end `x` {y} [z] (w) | ; \\ \\n \xff\u2028 -->"

// TestHostile: ids and descriptions that break every format that does not
// escape still give well-formed output.
func TestHostile(t *testing.T) {
	s := &state.State{
		Atoms: []state.Atom{
			{ID: `A"<&>`, Description: hostile, Status: state.StatusPending, DependsOn: []string{}},
			{ID: "end", Description: hostile, Status: state.StatusPending, DependsOn: []string{`A"<&>`}, ORGroup: `g"<x>`},
			{ID: "subgraph", Description: hostile, Status: state.StatusPending, DependsOn: []string{"end"}},
		},
		ORGroups: []state.ORGroup{{Name: `g"<x>`, Choices: []string{"end"}, Selected: "end"}},
	}
	g := Build(s, Options{})
	out := map[string]string{}
	for ext, f := range render {
		var buf bytes.Buffer
		if err := f(&buf, g); err != nil {
			t.Fatal(err)
		}
		out[ext] = buf.String()
	}

	t.Run("svg is well-formed XML", func(t *testing.T) { wellFormed(t, out["svg"]) })
	t.Run("json round-trips", func(t *testing.T) {
		var back Graph
		if err := json.Unmarshal([]byte(out["json"]), &back); err != nil {
			t.Fatal(err)
		}
		if back.Nodes[0].ID != `A"<&>` {
			t.Errorf("id %q", back.Nodes[0].ID)
		}
	})
	t.Run("mermaid labels are one quoted string", func(t *testing.T) {
		for _, line := range strings.Split(strings.TrimSpace(out["mmd"]), "\n") {
			if strings.Contains(line, "[\"") && strings.Count(line, `"`) != 2 {
				t.Errorf("label with a bare quote: %s", line)
			}
			for _, bad := range []string{"<script", "%%", "`", "-->\"", "\\"} {
				if strings.Contains(line, "[\"") && strings.Contains(line, bad) {
					t.Errorf("unescaped %q: %s", bad, line)
				}
			}
		}
		if strings.Count(out["mmd"], "\n") != strings.Count(out["mmd"], "\n  ")+1 {
			t.Errorf("a label broke a line:\n%s", out["mmd"])
		}
	})
	t.Run("dot strings are closed", func(t *testing.T) {
		for _, line := range strings.Split(out["dot"], "\n") {
			// Outside escapes, quotes pair up on every line.
			if n := strings.Count(strings.ReplaceAll(strings.ReplaceAll(line, `\\`, ""), `\"`, ""), `"`); n%2 != 0 {
				t.Errorf("odd quotes: %s", line)
			}
		}
		if _, err := exec.LookPath("dot"); err != nil {
			t.Skip("Graphviz dot is not installed; the DOT was checked by hand only")
		}
		cmd := exec.Command("dot", "-Tsvg")
		cmd.Stdin = strings.NewReader(out["dot"])
		svg, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("dot: %v\n%s", err, ee.Stderr)
			}
			t.Fatal(err)
		}
		wellFormed(t, string(svg))
	})
}

// wellFormed parses an SVG document with encoding/xml, to the end.
func wellFormed(t *testing.T, doc string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Strict = true
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, doc)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
}

// TestGoldenSVGWellFormed: the golden SVG is well-formed too.
func TestGoldenSVGWellFormed(t *testing.T) {
	var buf bytes.Buffer
	if err := SVG(&buf, Build(load(t, "work.md"), Options{})); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, buf.String())
	var buf2 bytes.Buffer
	if err := SVG(&buf2, Build(&state.State{}, Options{})); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, buf2.String())
}

func TestLabel(t *testing.T) {
	tests := []struct{ in, want string }{
		{"short", "short"},
		{"  two\n\tlines  ", "two lines"},
		{"a\x00b\xffc", "a b\uFFFDc"},
		{strings.Repeat("x", 40), strings.Repeat("x", 29) + "…"},
		{strings.Repeat("é", 30), strings.Repeat("é", 30)},
	}
	for _, tt := range tests {
		if got := Label(tt.in); got != tt.want {
			t.Errorf("Label(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// layered is a work graph of n atoms in about sqrt(n) layers, each atom
// depending on one to three of the layer before, the first 40% resolved, a
// few in progress; every 25th atom of a layer has an alternative (an OR
// group of two whose first choice failed) and every 40th is decomposed into
// two children.
func layered(n int) *state.State {
	width := 1
	for width*width < n {
		width++
	}
	s := state.New(state.Objective{Goal: "Migrate", BaseCase: &state.BaseCase{Legacy: &state.Check{Type: state.CheckCommand, Value: "true"}},
		BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c"}, make([]state.Atom, 0, n+n/10), "Migrate.")
	id := func(i int) string { return "T" + strconv.Itoa(i) }
	for i := 0; i < n; i++ {
		a := state.Atom{ID: id(i), Description: "Step " + strconv.Itoa(i) + " of the migration", Status: state.StatusPending, DependsOn: []string{}}
		if l := i / width; l > 0 {
			for k := 0; k <= i%3; k++ {
				if d := id((l-1)*width + (i*5+k*11)%width); !contains(a.DependsOn, d) {
					a.DependsOn = append(a.DependsOn, d)
				}
			}
		}
		switch {
		case i < n*2/5:
			a.Status = state.StatusResolved
		case i < n*2/5+4:
			a.Status = state.StatusInProgress
		}
		s.Atoms = append(s.Atoms, a)
		switch {
		case i%width%25 == 7:
			alt := a
			alt.ID = a.ID + "b"
			alt.Status = state.StatusPending
			s.Atoms[len(s.Atoms)-1].ORGroup = "g" + a.ID
			alt.ORGroup = "g" + a.ID
			s.Atoms = append(s.Atoms, alt)
			s.ORGroups = append(s.ORGroups, state.ORGroup{Name: "g" + a.ID, Choices: []string{a.ID, alt.ID}, Selected: alt.ID, Failed: []string{a.ID}})
		case i%width%40 == 13 && a.Status == state.StatusPending:
			c1, c2 := a, a
			c1.ID, c2.ID = a.ID+"x", a.ID+"y"
			s.Atoms = append(s.Atoms, c1, c2)
			s.Decompositions = append(s.Decompositions, state.Decomposition{Parent: a.ID, Children: []string{c1.ID, c2.ID}, Reason: "big"})
		}
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
