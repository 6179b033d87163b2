package ccw

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const junitSample = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="1" errors="1">
  <testsuite name="auth" tests="4">
    <testcase name="logs in" classname="auth.LoginTest" time="0.120"/>
    <testcase name="logs out" classname="auth.LoginTest" time="0.030">
      <failure message="expected 200, got 500" type="AssertionError">AssertionError: expected 200, got 500
    at LoginTest.logsOut (login.test.js:12:5)</failure>
    </testcase>
    <testcase name="refreshes" classname="auth.TokenTest" time="1">
      <error>TypeError: undefined is not a function
    at refresh (token.js:3:1)</error>
    </testcase>
    <testcase name="sso" classname="auth.SSOTest"><skipped/></testcase>
  </testsuite>
</testsuites>
`

func TestParseReports(t *testing.T) {
	msg := func(s string) *string { return &s }
	tests := []struct {
		name      string
		outputs   []string
		wantTests []TestResult
		wantCov   *float64
	}{
		{
			name:    "go test -json",
			outputs: []string{goTestJSONSample},
			wantTests: []TestResult{
				{TestName: "TestLogin", Suite: "example.com/auth", Status: TestPassed, DurationMS: 10},
				{TestName: "TestLogout", Suite: "example.com/auth", Status: TestFailed, DurationMS: 20, ErrorMessage: msg("auth_test.go:42: session still open\n--- FAIL: TestLogout (0.02s)")},
				{TestName: "TestOAuth", Suite: "example.com/auth", Status: TestSkipped},
			},
			wantCov: ptr(81.2),
		},
		{
			name:    "go test -json cut off mid-test: the unfinished test is left out",
			outputs: []string{strings.Join(strings.Split(goTestJSONSample, "\n")[:8], "\n")},
			wantTests: []TestResult{
				{TestName: "TestLogin", Suite: "example.com/auth", Status: TestPassed, DurationMS: 10},
			},
		},
		{
			name:    "JUnit XML after other output",
			outputs: []string{"npm test\n> jest --ci\n" + junitSample},
			wantTests: []TestResult{
				{TestName: "logs in", Suite: "auth.LoginTest", Status: TestPassed, DurationMS: 120},
				{TestName: "logs out", Suite: "auth.LoginTest", Status: TestFailed, DurationMS: 30, ErrorMessage: msg("expected 200, got 500"),
					StackTrace: msg("AssertionError: expected 200, got 500\n    at LoginTest.logsOut (login.test.js:12:5)")},
				{TestName: "refreshes", Suite: "auth.TokenTest", Status: TestFailed, DurationMS: 1000, ErrorMessage: msg("TypeError: undefined is not a function"),
					StackTrace: msg("TypeError: undefined is not a function\n    at refresh (token.js:3:1)")},
				{TestName: "sso", Suite: "auth.SSOTest", Status: TestSkipped},
			},
		},
		{
			name:      "JUnit XML cut short gives nothing",
			outputs:   []string{junitSample[:len(junitSample)/2]},
			wantTests: []TestResult{},
		},
		{
			name:    "a single testsuite as the root",
			outputs: []string{`<testsuite name="s"><testcase name="a"/></testsuite>`},
			wantTests: []TestResult{
				{TestName: "a", Suite: "s", Status: TestPassed},
			},
		},
		{
			name:    "go test -v lines",
			outputs: []string{"=== RUN   TestA\n--- PASS: TestA (0.50s)\n=== RUN   TestB\n    --- FAIL: TestB/sub (0.00s)\nFAIL\n"},
			wantTests: []TestResult{
				{TestName: "TestA", Status: TestPassed, DurationMS: 500},
				{TestName: "TestB/sub", Status: TestFailed},
			},
		},
		{
			name:      "go test -cover over packages: their mean",
			outputs:   []string{"ok  \texample.com/a\t0.1s\tcoverage: 80.0% of statements\nok  \texample.com/b\t0.1s\tcoverage: 61.5% of statements\n?   \texample.com/c\t[no test files]\n"},
			wantTests: []TestResult{},
			wantCov:   ptr(70.75),
		},
		{
			name:      "a package's coverage said twice counts once",
			outputs:   []string{"coverage: 50.0% of statements\nok  \tx\t0.1s\tcoverage: 50.0% of statements\nok  \ty\t0.1s\tcoverage: 100.0% of statements\n"},
			wantTests: []TestResult{},
			wantCov:   ptr(75.0),
		},
		{
			name:      "go tool cover -func total wins",
			outputs:   []string{"x.go:3:\tF\t50.0%\ntotal:\t\t\t(statements)\t64.3%\n", "ok  \tx\t0.1s\tcoverage: 99.0% of statements"},
			wantTests: []TestResult{},
			wantCov:   ptr(64.3),
		},
		{
			name:      "coverage.py TOTAL",
			outputs:   []string{"Name    Stmts   Miss  Cover\n---\napp.py     20      3    85%\nTOTAL      40      6    85%\n"},
			wantTests: []TestResult{},
			wantCov:   ptr(85.0),
		},
		{
			name:      "istanbul All files",
			outputs:   []string{"----------|---------|\nFile      | % Stmts |\n----------|---------|\nAll files |   85.71 |    50 |\n"},
			wantTests: []TestResult{},
			wantCov:   ptr(85.71),
		},
		{
			name:      "lcov summary",
			outputs:   []string{"Summary coverage rate:\n  lines......: 72.5% (29 of 40 lines)\n"},
			wantTests: []TestResult{},
			wantCov:   ptr(72.5),
		},
		{
			name:      "garbage",
			outputs:   []string{"\x00\xff{not json\n<testsuite <<<\ncoverage: lots\nTOTAL 140%\n{\"Action\":", ""},
			wantTests: []TestResult{},
		},
		{
			name:      "nothing",
			wantTests: []TestResult{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseReports(tt.outputs...)
			if diff := cmp.Diff(tt.wantTests, got.Tests); diff != "" {
				t.Errorf("tests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCov, got.Coverage); diff != "" {
				t.Errorf("coverage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseReportsClipsLongFailures(t *testing.T) {
	long := strings.Repeat("é", 3000)
	out := `<testsuite name="s"><testcase name="a"><failure message="` + long + `"/></testcase></testsuite>`
	got := ParseReports(out).Tests[0].ErrorMessage
	if got == nil || len(*got) > maxErrorMessage+len("…") || !strings.HasSuffix(*got, "…") || !strings.HasPrefix(*got, "éé") {
		t.Errorf("error message not clipped on a rune boundary: %d bytes", len(*got))
	}
}
