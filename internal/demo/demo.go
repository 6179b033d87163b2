// Package demo is aot's self-contained example: a small project (a static
// site) whose work graph shows every part of the loop, and a scripted agent
// that does its work without an LLM. The agent is a real process (aot
// demo-agent) driven by the exec protocol, like any user's agent.
//
// What the run shows: A1 and A2 run in parallel; the OR group "render"
// first tries B1, which fails, and backtracks to B2; C fails twice, is probed,
// and the planner splits it into C1 and C2, after which C resolves by itself;
// D joins everything; then aot runs the base case's checks itself and halts.
package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/state"
)

// Write creates the demo project's state file in dir. It never replaces a
// state file: a directory that already has one (or anything else at its
// path) is refused, so that a demo cannot overwrite a project's loop.
func Write(dir string) (string, error) {
	path := filepath.Join(dir, state.DefaultPath)
	if err := state.CheckPath(path); !errors.Is(err, state.ErrNotExist) {
		if err != nil {
			return "", err
		}
		return "", fmt.Errorf("%s already has a state file (%s); aot demo never replaces one: give it a new or empty directory", dir, path)
	}
	check := func(item, typ, value string) state.ChecklistItem {
		return state.ChecklistItem{Item: item, Check: &state.Check{Type: typ, Value: value}}
	}
	obj := state.Objective{
		Goal:             "Build a small static site: a home page, a stylesheet, an about page and the content pages, with working links",
		BackgroundIntent: "A demo of AoT Loop: parallel atoms, an OR alternative that fails and backtracks, a decomposition, verification",
		Deliverables:     "site/index.html, site/style.css, site/about.html, site/intro.html, site/faq.html, site/links.txt",
		DefinitionOfDone: "Every page exists, the FAQ has content, no temporary files are left, the link check passed",
		BaseCase: &state.BaseCase{HasChecklist: true, Checklist: []state.ChecklistItem{
			{Item: "pages", HasGroup: true, Group: []state.ChecklistItem{
				check("home page", state.CheckFile, "site/index.html"),
				check("stylesheet", state.CheckFile, "site/*.css"),
				check("content", state.CheckFile, "site/**/faq.html"),
			}},
			check("the FAQ has content", state.CheckCommand, "grep -q 'Frequently asked' site/faq.html"),
			check("no temporary files", state.CheckNotFile, "site/**/*.tmp"),
			check("links checked", state.CheckCommand, "test -s site/links.txt"),
		}},
		Constraints: state.Constraints{MaxIterations: 30, MaxParallelAgents: 3, MaxStallCount: 3, MaxWallTime: "2m", MaxAttemptsPerAtom: 4},
	}
	atom := func(id, desc, group string, deps ...string) state.Atom {
		if deps == nil {
			deps = []string{}
		}
		return state.Atom{ID: id, Description: desc, Status: state.StatusPending, DependsOn: deps, ORGroup: group}
	}
	s := state.New(obj, []state.Atom{
		atom("A1", "Write the home page skeleton", ""),
		atom("A2", "Write the stylesheet", ""),
		atom("B1", "Render the about page with a template engine", "render"),
		atom("B2", "Render the about page as plain HTML", "render"),
		atom("C", "Write all the content pages", "", "A1"),
		atom("D", "Check every link of the site", "", "A2", "B1", "C"),
	}, "aot demo: build a small static site")
	s.ORGroups = []state.ORGroup{{Name: "render", Choices: []string{"B1", "B2"}, Selected: "B1", Failed: []string{}}}
	if err := state.NewStore(path).Create(s, false); err != nil {
		return "", err
	}
	return path, nil
}

// files each successful worker writes, relative to the project.
var files = map[string]map[string]string{
	"A1": {"site/index.html": "<html><head><link rel=stylesheet href=style.css></head><body><a href=about.html>About</a> <a href=intro.html>Intro</a> <a href=faq.html>FAQ</a></body></html>\n"},
	"A2": {"site/style.css": "body { font-family: sans-serif; max-width: 40em; margin: auto }\n"},
	"B2": {"site/about.html": "<html><body><h1>About</h1><p>Built by an AoT loop.</p></body></html>\n"},
	"C1": {"site/intro.html": "<html><body><h1>Intro</h1><p>What this site is.</p></body></html>\n"},
	"C2": {"site/faq.html": "<html><body><h1>Frequently asked questions</h1><p>Does it stop? Yes, provably.</p></body></html>\n"},
	"D":  {"site/links.txt": "index.html -> about.html ok\nindex.html -> intro.html ok\nindex.html -> faq.html ok\n"},
}

// Pace is how long each scripted step takes, so that a person can watch.
const Pace = 300 * time.Millisecond

// Agent answers one task of the demo on stdout, as the exec protocol wants.
func Agent(stdin io.Reader, stdout io.Writer, pace time.Duration) error {
	var t agent.Task
	if err := json.NewDecoder(stdin).Decode(&t); err != nil {
		return fmt.Errorf("demo agent: read task: %w", err)
	}
	time.Sleep(pace)
	res := answer(t)
	if t.Role == agent.Worker && res.Success {
		for name, body := range files[t.Atom.ID] {
			p := filepath.Join(t.Workdir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				return err
			}
			res.Artifacts = append(res.Artifacts, name)
		}
	}
	res.Usage = agent.Usage{InputTokens: 800, OutputTokens: 200}
	return json.NewEncoder(stdout).Encode(res)
}

func answer(t agent.Task) agent.Result {
	id := t.Atom.ID
	switch t.Role {
	case agent.Probe:
		return agent.Result{Feasible: true, Findings: id + " is feasible but large: the content is several pages"}
	case agent.Planner:
		if id == "C" {
			return agent.Result{Decompositions: []agent.PlannedDecomposition{{
				Parent: "C", Reason: "C failed twice: one page at a time",
				Children: []agent.PlannedAtom{
					{ID: "C1", Description: "Write the intro page"},
					{ID: "C2", Description: "Write the FAQ page", DependsOn: []string{"C1"}},
				},
			}}}
		}
		return agent.Result{}
	case agent.Judge, agent.Verifier:
		return agent.Result{Passed: true, Evidence: "the demo has no judged checks"}
	}
	switch id {
	case "B1":
		return agent.Result{Success: false, Summary: "no template engine is installed"}
	case "C":
		return agent.Result{Success: false, Summary: "attempt " + strconv.Itoa(t.Attempt) + ": too much content for one step"}
	}
	return agent.Result{Success: true, Summary: "wrote " + id}
}
