package ccw

import (
	"sort"

	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

// CCW's validate phase is the base case's last verification.

func validate(ev *journal.Event, runs int, outputs map[string]string) Validate {
	v := Validate{TestResults: []TestResult{}, FailedTests: []string{}, Checklist: []verify.ItemResult{}, Runs: runs}
	if ev == nil {
		return v
	}
	t := ev.Time
	v.LastRunAt = &t
	v.Passed = ev.OK != nil && *ev.OK
	d := journal.DataOf[journal.VerifyData](*ev)
	v.Failures = d.Failures
	if d.Checklist != nil {
		v.Checklist = d.Checklist
	}
	var texts []string
	if len(outputs) > 0 {
		names := make([]string, 0, len(outputs))
		for name := range outputs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			texts = append(texts, outputs[name])
		}
	} else {
		texts = evidenceTexts(v.Checklist, texts)
	}
	rep := ParseReports(texts...)
	v.TestResults, v.Coverage = rep.Tests, rep.Coverage
	passed, counted := 0, 0
	for _, tr := range rep.Tests {
		switch tr.Status {
		case TestPassed:
			passed++
			counted++
		case TestFailed:
			counted++
			v.FailedTests = append(v.FailedTests, testID(tr))
		}
	}
	if counted > 0 {
		v.PassRateBasis = "tests"
	} else if len(v.Checklist) > 0 {
		v.PassRateBasis = "checklist"
		for _, it := range v.Checklist {
			counted++
			if it.Passed {
				passed++
			}
		}
	}
	if counted > 0 {
		rate := roundTo(100*float64(passed)/float64(counted), 2)
		v.PassRate = &rate
	}
	return v
}

func testID(t TestResult) string {
	if t.Suite == "" {
		return t.TestName
	}
	return t.Suite + "." + t.TestName
}

// evidenceTexts collects the command checks' evidence, depth first.
func evidenceTexts(items []verify.ItemResult, out []string) []string {
	for _, it := range items {
		if it.Type == state.CheckCommand || it.Type == state.CheckNotCommand {
			out = append(out, it.Evidence)
		}
		out = evidenceTexts(it.GroupResults, out)
		out = evidenceTexts(it.AnyOfResults, out)
	}
	return out
}
