package state

// Many processes changing one state file at once (seed defect D3: 20
// parallel scripts kept only 13-15 of 20 updates, and 10 parallel bindings
// left an empty file in 8 of 9 trials). The test binary re-runs itself as
// the child processes, selected by TestHelperProcess and an environment
// variable.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const (
	helperEnv     = "AOT_STATE_TEST_HELPER" // which child to run: "updater" or "counter"
	helperFileEnv = "AOT_STATE_TEST_FILE"
	helperIDEnv   = "AOT_STATE_TEST_ATOM"
	helperNEnv    = "AOT_STATE_TEST_UPDATES"
)

// TestHelperProcess is not a test: it is the child process of the
// concurrency and crash tests, and returns at once when run normally.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	st := NewStore(os.Getenv(helperFileEnv))
	var err error
	switch mode {
	case "updater":
		n, _ := strconv.Atoi(os.Getenv(helperNEnv))
		err = appendUpdates(st, os.Getenv(helperIDEnv), n)
	case "counter":
		err = countForever(st, st.Update)
	case "control-counter":
		err = countForever(st, st.UpdateControl)
	case "controller":
		n, _ := strconv.Atoi(os.Getenv(helperNEnv))
		for i := 0; i < n && err == nil; i++ {
			_, err = st.RefuseInvalid().UpdateControl(func(s *State) error { s.Control.Iteration++; return nil })
		}
	default:
		err = fmt.Errorf("unknown helper %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// appendUpdates makes n updates to atom id, each visible in the file: the
// atom's attempts counts them and its binding lists one artifact per update.
// An update that finds the previous one missing fails at once.
func appendUpdates(st *Store, id string, n int) error {
	for i := 0; i < n; i++ {
		_, err := st.Update(func(s *State) error {
			a := s.Atom(id)
			if a == nil {
				return fmt.Errorf("atom %s is gone", id)
			}
			var arts []string
			if b := s.Binding(id); b != nil {
				arts = b.Artifacts
			}
			if a.Attempts != i || len(arts) != i {
				return fmt.Errorf("update %d of %s: lost updates: attempts %d, %d artifacts", i, id, a.Attempts, len(arts))
			}
			a.Attempts++
			s.SetBinding(Binding{AtomID: id, Summary: "update " + strconv.Itoa(i+1), Artifacts: append(arts, id+"-"+strconv.Itoa(i))})
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// countForever bumps control.iteration through update until it is killed.
// It prints one line after its first write so that the parent kills it
// while it works.
func countForever(st *Store, update func(func(*State) error) (*State, error)) error {
	for first := true; ; first = false {
		if _, err := update(func(s *State) error { s.Control.Iteration++; return nil }); err != nil {
			return err
		}
		if first {
			fmt.Println("ready")
		}
	}
}

// helperCmd returns a command that runs this test binary as the helper mode.
func helperCmd(mode, file string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperFileEnv+"="+file)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// stateWithAtoms is miniState with atoms P0..Pn-1 instead of A1.
func stateWithAtoms(t *testing.T, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - id: P%d\n    description: \"worker %d\"\n    status: pending\n    depends_on: []\n", i, i)
	}
	head := miniState[:strings.Index(miniState, "  - id: A1\n")]
	return head + b.String() + "---\n"
}

func TestD3ConcurrentProcessesLoseNoUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 processes")
	}
	const procs, updates = 16, 200
	st := writeState(t, stateWithAtoms(t, procs))
	runHelpers(t, st, procs, 0, updates)
	checkUpdaters(t, st, procs, updates)
}

// TestUpdateControlAmongOtherWriters runs the hooks' control updates beside
// processes that change atoms and bindings: no update of either is lost.
func TestUpdateControlAmongOtherWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 12 processes")
	}
	const procs, controllers, updates = 8, 4, 100
	st := writeState(t, stateWithAtoms(t, procs))
	runHelpers(t, st, procs, controllers, updates)
	s := checkUpdaters(t, st, procs, updates)
	if want := 1 + controllers*updates; s.Control.Iteration != want {
		t.Errorf("iteration %d, want %d: control updates were lost", s.Control.Iteration, want)
	}
}

// runHelpers runs procs updaters (of atoms P0...) and controllers (of
// control.iteration) at once, each making updates changes.
func runHelpers(t *testing.T, st *Store, procs, controllers, updates int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, procs+controllers)
	for p := 0; p < procs+controllers; p++ {
		wg.Go(func() {
			cmd := helperCmd("updater", st.Path(), helperIDEnv+"=P"+strconv.Itoa(p), helperNEnv+"="+strconv.Itoa(updates))
			if p >= procs {
				cmd = helperCmd("controller", st.Path(), helperNEnv+"="+strconv.Itoa(updates))
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				errs[p] = fmt.Errorf("process %d: %v\n%s", p, err, out.Bytes())
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// checkUpdaters checks that every update of runHelpers' updaters is in the
// file, and returns the state.
func checkUpdaters(t *testing.T, st *Store, procs, updates int) *State {
	t.Helper()
	s, err := st.Read()
	if err != nil {
		t.Fatal(err)
	}
	if r := Validate(s); !r.Valid() {
		t.Errorf("the file does not validate: %v", r.Errors)
	}
	total := 0
	for p := 0; p < procs; p++ {
		id := "P" + strconv.Itoa(p)
		a, b := s.Atom(id), s.Binding(id)
		if a == nil || b == nil {
			t.Errorf("%s: atom %v, binding %v", id, a, b)
			continue
		}
		if a.Attempts != updates || len(b.Artifacts) != updates {
			t.Errorf("%s: attempts %d, %d artifacts, want %d", id, a.Attempts, len(b.Artifacts), updates)
		}
		for i, art := range b.Artifacts {
			if want := id + "-" + strconv.Itoa(i); art != want {
				t.Errorf("%s: artifact %d is %q, want %q", id, i, art, want)
				break
			}
			total++
		}
	}
	if total != procs*updates {
		t.Errorf("%d of %d updates in the file", total, procs*updates)
	}
	entries, _ := os.ReadDir(filepath.Dir(st.Path()))
	for _, e := range entries {
		if e.Name() != "state.md" && e.Name() != "state.md.lock" {
			t.Errorf("left behind %s", e.Name())
		}
	}
	return s
}
