package ccw

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// maxErrorMessage bounds a failed test's error_message.
const maxErrorMessage = 2000

// Report is what a check's output says about tests and coverage.
type Report struct {
	Tests    []TestResult
	Coverage *float64 // percent; nil when no output gave one
}

// ParseReports reads test results and coverage from command outputs: go
// test -json lines, a JUnit XML report, or go test -v's "--- PASS" lines
// (the first of these an output holds), and coverage lines: go test's
// "coverage: 81.2% of statements", go tool cover's "total: (statements)",
// coverage.py's "TOTAL ... 85%", istanbul's "All files | 85.7 |" and lcov's
// "lines......: 85.0%". A total wins over per-package figures; several
// packages with no total give their mean. Anything else is ignored.
func ParseReports(outputs ...string) Report {
	rep := Report{Tests: []TestResult{}}
	cov := &coverage{pkgs: map[string]float64{}}
	for _, out := range outputs {
		tests, text, ok := goTestJSON(out, cov)
		if !ok {
			tests, ok = junit(out)
			text = out
		}
		if !ok {
			tests = goTestVerbose(out)
		}
		rep.Tests = append(rep.Tests, tests...)
		cov.scan(text)
	}
	rep.Coverage = cov.result()
	return rep
}

// goEvent is one line of go test -json (test2json).
type goEvent struct {
	Action  string  `json:"Action"`
	Package string  `json:"Package"`
	Test    string  `json:"Test"`
	Elapsed float64 `json:"Elapsed"`
	Output  string  `json:"Output"`
}

// goTestJSON reads go test -json lines. text is the output with each JSON
// line replaced by the output it carries (for the coverage lines); ok says
// the output held test2json lines.
func goTestJSON(out string, cov *coverage) (tests []TestResult, text string, ok bool) {
	type test struct {
		result TestResult
		output strings.Builder
		done   bool
	}
	var order []*test
	byKey := map[string]*test{}
	var plain strings.Builder
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		var ev goEvent
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &ev) != nil || ev.Action == "" {
			plain.WriteString(sc.Text())
			plain.WriteByte('\n')
			continue
		}
		ok = true
		if ev.Test == "" {
			if ev.Action == "output" {
				cov.scanPackage(ev.Package, ev.Output)
			}
			continue
		}
		key := ev.Package + "\x00" + ev.Test
		t := byKey[key]
		if t == nil {
			t = &test{result: TestResult{TestName: ev.Test, Suite: ev.Package}}
			byKey[key] = t
			order = append(order, t)
		}
		switch ev.Action {
		case "output":
			if !strings.HasPrefix(strings.TrimSpace(ev.Output), "=== ") && t.output.Len() < 4*maxErrorMessage {
				t.output.WriteString(ev.Output)
			}
		case "pass", "fail", "skip":
			t.done = true
			t.result.Status = map[string]string{"pass": TestPassed, "fail": TestFailed, "skip": TestSkipped}[ev.Action]
			t.result.DurationMS = roundTo(ev.Elapsed*1000, 3)
		}
	}
	for _, t := range order {
		if !t.done {
			continue // still running, or the output was cut
		}
		if t.result.Status == TestFailed {
			msg := clip(strings.TrimSpace(t.output.String()), maxErrorMessage)
			if msg != "" {
				t.result.ErrorMessage = &msg
			}
		}
		tests = append(tests, t.result)
	}
	return tests, plain.String(), ok
}

type junitSuite struct {
	Name   string       `xml:"name,attr"`
	Suites []junitSuite `xml:"testsuite"`
	Cases  []junitCase  `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	Skipped   *struct{}     `xml:"skipped"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// junit reads the first JUnit XML report in out (<testsuites> or
// <testsuite>). A report that does not parse to its end gives nothing: a
// cut one could show a failed test as passed.
func junit(out string) ([]TestResult, bool) {
	i := strings.Index(out, "<testsuites")
	if j := strings.Index(out, "<testsuite"); i < 0 || j >= 0 && j < i {
		i = j
	}
	if i < 0 {
		return nil, false
	}
	var root junitSuite
	dec := xml.NewDecoder(strings.NewReader(out[i:]))
	if err := dec.Decode(&root); err != nil {
		return nil, false
	}
	tests := []TestResult{}
	var walk func(s junitSuite)
	walk = func(s junitSuite) {
		for _, c := range s.Cases {
			tests = append(tests, junitResult(s.Name, c))
		}
		for _, sub := range s.Suites {
			walk(sub)
		}
	}
	walk(root)
	return tests, true
}

func junitResult(suite string, c junitCase) TestResult {
	t := TestResult{TestName: c.Name, Suite: suite, Status: TestPassed}
	if c.Classname != "" {
		t.Suite = c.Classname
	}
	if secs, err := strconv.ParseFloat(strings.TrimSpace(c.Time), 64); err == nil {
		t.DurationMS = roundTo(secs*1000, 3)
	}
	p := c.Failure
	if p == nil {
		p = c.Error
	}
	switch {
	case p != nil:
		t.Status = TestFailed
		msg, trace := strings.TrimSpace(p.Message), strings.TrimSpace(p.Text)
		if msg == "" {
			msg, _, _ = strings.Cut(trace, "\n")
		}
		if msg != "" {
			msg = clip(msg, maxErrorMessage)
			t.ErrorMessage = &msg
		}
		if trace != "" {
			trace = clip(trace, 4*maxErrorMessage)
			t.StackTrace = &trace
		}
	case c.Skipped != nil:
		t.Status = TestSkipped
	}
	return t
}

// The report patterns compile on first use, not when every aot command starts.
var verboseLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \((\d+(?:\.\d+)?)s\)`)
})

// goTestVerbose reads go test -v's result lines.
func goTestVerbose(out string) []TestResult {
	var tests []TestResult
	for _, line := range strings.Split(out, "\n") {
		m := verboseLine().FindStringSubmatch(line)
		if m == nil {
			continue
		}
		secs, _ := strconv.ParseFloat(m[3], 64)
		status := map[string]string{"PASS": TestPassed, "FAIL": TestFailed, "SKIP": TestSkipped}[m[1]]
		tests = append(tests, TestResult{TestName: m[2], Status: status, DurationMS: roundTo(secs*1000, 3)})
	}
	return tests
}

var (
	goPackageCoverage = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:ok|FAIL)\s+(\S+)\s.*\bcoverage: (\d+(?:\.\d+)?)% of statements`)
	})
	goBareCoverage = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\bcoverage: (\d+(?:\.\d+)?)% of statements`)
	})
	totalCoverage = sync.OnceValue(func() []*regexp.Regexp {
		return []*regexp.Regexp{
			regexp.MustCompile(`^total:\s+\(statements\)\s+(\d+(?:\.\d+)?)%\s*$`), // go tool cover -func
			regexp.MustCompile(`^TOTAL\s.*?(\d+(?:\.\d+)?)%\s*$`),                 // coverage.py, pytest-cov
			regexp.MustCompile(`^All files\s*\|\s*(\d+(?:\.\d+)?)\s*\|`),          // istanbul (jest, nyc): statements
			regexp.MustCompile(`^\s*lines\.*:\s*(\d+(?:\.\d+)?)%`),                // lcov, genhtml
		}
	})
)

// coverage gathers coverage figures across outputs.
type coverage struct {
	total *float64           // the last total seen
	pkgs  map[string]float64 // per package, from go test
	bare  []float64          // go test lines that name no package
}

func (c *coverage) scanPackage(pkg, line string) {
	if m := goBareCoverage().FindStringSubmatch(line); m != nil {
		if v, ok := percent(m[1]); ok {
			c.pkgs[pkg] = v
		}
	}
}

func (c *coverage) scan(text string) {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		for _, re := range totalCoverage() {
			if m := re.FindStringSubmatch(line); m != nil {
				if v, ok := percent(m[1]); ok {
					c.total = &v
				}
			}
		}
		if m := goPackageCoverage().FindStringSubmatch(line); m != nil {
			if v, ok := percent(m[2]); ok {
				c.pkgs[m[1]] = v
			}
		} else if m := goBareCoverage().FindStringSubmatch(line); m != nil {
			if v, ok := percent(m[1]); ok {
				c.bare = append(c.bare, v)
			}
		}
	}
}

func (c *coverage) result() *float64 {
	if c.total != nil {
		return c.total
	}
	vals := c.bare
	if len(c.pkgs) > 0 {
		vals = vals[:0:0]
		for _, v := range c.pkgs {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	sort.Float64s(vals) // the same sum whatever the map's order
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	mean := roundTo(sum/float64(len(vals)), 2)
	return &mean
}

func percent(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v > 100 {
		return 0, false
	}
	return v, true
}

func roundTo(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// clip shortens s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
