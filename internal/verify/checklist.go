package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aot-loop/aot/internal/state"
)

// legacyItem names the single check of a legacy {type, value} base case.
const legacyItem = "base_case"

// ItemResult is the outcome of one checklist item: a check, or a group whose
// children's results it carries.
type ItemResult struct {
	Item         string       `json:"item"`
	Type         string       `json:"type,omitempty"` // the check type; empty for group and any_of
	Passed       bool         `json:"passed"`
	Evidence     string       `json:"evidence"`
	NeedsJudge   bool         `json:"needs_judge,omitempty"` // undecided until a judge rules on it
	GroupResults []ItemResult `json:"group_results,omitempty"`
	AnyOfResults []ItemResult `json:"any_of_results,omitempty"`
	Line         int          `json:"line,omitempty"`
}

// Skipped is a judged check that was not decided.
type Skipped struct {
	Item   string `json:"item"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// Report is the verdict on a whole base case.
type Report struct {
	Passed    bool         `json:"passed"`
	Checklist []ItemResult `json:"checklist"`
	Skipped   []Skipped    `json:"skipped"` // never nil
}

// Judge rules on the checks a program cannot decide: assertion and quality.
type Judge interface {
	Judge(ctx context.Context, item string, c *state.Check) (passed bool, evidence string, err error)
}

// Options configure BaseCase.
type Options struct {
	Dir     string        // where commands run and relative paths start; "" is the current directory
	Judge   Judge         // nil leaves assertion and quality checks skipped
	Timeout time.Duration // per command check without its own timeout; 0 means DefaultTimeout
	// Output, when set, receives each command check's whole output (the
	// evidence keeps only its tail); the writer is closed after the check.
	Output func(item string) io.WriteCloser
}

// reasonNeedsJudge is the Skipped.Reason of a judged check run without a Judge.
const reasonNeedsJudge = "needs a judge"

// BaseCase verifies every check of bc. The report passes only when every
// item passed and no judged check was left undecided. A base case that is
// missing or malformed (an empty checklist, group, any_of or command, an
// unknown check type, a bad timeout) is an error, found before anything
// runs; so is ctx ending before the verdict.
func BaseCase(ctx context.Context, bc *state.BaseCase, opts Options) (Report, error) {
	items, err := checklistOf(bc)
	if err != nil {
		return Report{}, err
	}
	for i := range items {
		if err := validateItem(&items[i]); err != nil {
			return Report{}, err
		}
	}

	ev := &evaluator{opts: opts}
	rep := Report{Passed: true, Checklist: make([]ItemResult, 0, len(items)), Skipped: []Skipped{}}
	for i := range items {
		r, skipped, out := ev.item(ctx, &items[i])
		rep.Checklist = append(rep.Checklist, r)
		rep.Skipped = append(rep.Skipped, skipped...)
		if out != passed {
			rep.Passed = false
		}
	}
	if len(rep.Skipped) > 0 {
		rep.Passed = false
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("verification interrupted: %w", err)
	}
	return rep, nil
}

// checklistOf returns the items to verify; a legacy base case is a
// checklist of one.
func checklistOf(bc *state.BaseCase) ([]state.ChecklistItem, error) {
	switch {
	case bc == nil || (bc.Legacy == nil && !bc.HasChecklist):
		return nil, errors.New("the objective has no base case: nothing can be verified")
	case bc.Legacy != nil && bc.HasChecklist:
		return nil, errors.New("the base case has both a checklist and a legacy type/value: keep one")
	case bc.Legacy != nil:
		return []state.ChecklistItem{{Item: legacyItem, Check: bc.Legacy, Line: bc.Legacy.Line}}, nil
	case len(bc.Checklist) == 0:
		return nil, errors.New("the base case checklist is empty: it would verify nothing")
	}
	return bc.Checklist, nil
}

// validateItem rejects what would otherwise pass vacuously or mean nothing.
func validateItem(it *state.ChecklistItem) error {
	kinds := 0
	for _, has := range []bool{it.Check != nil, it.HasGroup || len(it.Group) > 0, it.HasAnyOf || len(it.AnyOf) > 0} {
		if has {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		return itemErr(it, it.Line, "has no check, group or any_of")
	case kinds > 1:
		return itemErr(it, it.Line, "has more than one of check, group and any_of")
	case it.Check != nil:
		return validateCheck(it, it.Check)
	}
	children, kind := it.Group, "group"
	if it.HasAnyOf || len(it.AnyOf) > 0 {
		children, kind = it.AnyOf, "any_of"
	}
	if len(children) == 0 {
		return itemErr(it, it.Line, "has an empty %s: it would verify nothing", kind)
	}
	for i := range children {
		if err := validateItem(&children[i]); err != nil {
			return err
		}
	}
	return nil
}

func validateCheck(it *state.ChecklistItem, c *state.Check) error {
	line := c.Line
	if line == 0 {
		line = it.Line
	}
	switch c.Type {
	case state.CheckCommand, state.CheckNotCommand, state.CheckFile, state.CheckNotFile, state.CheckAssertion:
		if strings.TrimSpace(c.Value) == "" {
			return itemErr(it, line, "has a %s check with an empty value", c.Type)
		}
	case state.CheckQuality:
		if strings.TrimSpace(c.Criteria) == "" && len(c.Rubric) == 0 && strings.TrimSpace(c.Value) == "" {
			return itemErr(it, line, "has a quality check with neither criteria nor a rubric")
		}
	case "":
		return itemErr(it, line, "has a check without a type")
	default:
		return itemErr(it, line, "has an unknown check type %q (want command, not_command, file, not_file, assertion or quality)", c.Type)
	}
	if c.Timeout != "" {
		if _, err := ParseTimeout(c.Timeout); err != nil {
			return itemErr(it, line, "has a bad timeout: %v", err)
		}
	}
	return nil
}

func itemErr(it *state.ChecklistItem, line int, format string, args ...any) error {
	where := fmt.Sprintf("checklist item %q", it.Item)
	if it.Item == legacyItem && it.Check != nil && it.Line == it.Check.Line {
		where = "the base case"
	}
	if line > 0 {
		where += fmt.Sprintf(" (line %d)", line)
	}
	return fmt.Errorf("%s %s", where, fmt.Sprintf(format, args...))
}

// outcome is three-valued: a judged check without a verdict is neither a
// pass nor a fail, and a group holding one is undecided unless something
// else already decided it.
type outcome int

const (
	failed outcome = iota
	passed
	undecided
)

type evaluator struct {
	opts Options
}

// item evaluates one validated item. The skipped checks it returns are those
// that still matter to its outcome.
func (e *evaluator) item(ctx context.Context, it *state.ChecklistItem) (ItemResult, []Skipped, outcome) {
	switch {
	case it.Check != nil:
		return e.check(ctx, it)
	case len(it.Group) > 0:
		return e.group(ctx, it)
	default:
		return e.anyOf(ctx, it)
	}
}

// group passes when all its items pass; every item is evaluated and reported.
func (e *evaluator) group(ctx context.Context, it *state.ChecklistItem) (ItemResult, []Skipped, outcome) {
	res := ItemResult{Item: it.Item, Line: it.Line, GroupResults: make([]ItemResult, 0, len(it.Group))}
	var skipped []Skipped
	out, n := passed, 0
	for i := range it.Group {
		r, s, o := e.item(ctx, &it.Group[i])
		res.GroupResults = append(res.GroupResults, r)
		skipped = append(skipped, s...)
		switch {
		case o == passed:
			n++
		case o == failed:
			out = failed
		case out == passed:
			out = undecided
		}
	}
	res.Evidence = fmt.Sprintf("AND group: %d/%d passed", n, len(it.Group))
	return finish(res, out), skipped, out
}

// anyOf passes when one of its items passes. It stops at the first pass and
// reports the items evaluated so far; the undecided ones before it no longer
// matter.
func (e *evaluator) anyOf(ctx context.Context, it *state.ChecklistItem) (ItemResult, []Skipped, outcome) {
	res := ItemResult{Item: it.Item, Line: it.Line}
	var skipped []Skipped
	out := failed
	for i := range it.AnyOf {
		r, s, o := e.item(ctx, &it.AnyOf[i])
		res.AnyOfResults = append(res.AnyOfResults, r)
		skipped = append(skipped, s...)
		if o == passed {
			out, skipped = passed, nil
			break
		}
		if o == undecided {
			out = undecided
		}
	}
	n := 0
	if out == passed {
		n = 1
	}
	res.Evidence = fmt.Sprintf("OR group: %d/%d passed (need 1)", n, len(it.AnyOf))
	if rest := len(it.AnyOf) - len(res.AnyOfResults); rest > 0 {
		res.Evidence += fmt.Sprintf("; %d not evaluated", rest)
	}
	return finish(res, out), skipped, out
}

func finish(r ItemResult, o outcome) ItemResult {
	r.Passed = o == passed
	r.NeedsJudge = o == undecided
	return r
}

func (e *evaluator) check(ctx context.Context, it *state.ChecklistItem) (ItemResult, []Skipped, outcome) {
	c := it.Check
	res := ItemResult{Item: it.Item, Type: c.Type, Line: it.Line}
	switch c.Type {
	case state.CheckCommand, state.CheckNotCommand:
		var full io.WriteCloser
		if e.opts.Output != nil {
			full = e.opts.Output(it.Item)
		}
		var r CommandResult
		if full != nil {
			r = CommandTo(ctx, e.opts.Dir, c.Value, c.Type == state.CheckNotCommand, e.timeout(c), full)
			_ = full.Close()
		} else {
			r = Command(ctx, e.opts.Dir, c.Value, c.Type == state.CheckNotCommand, e.timeout(c))
		}
		res.Passed, res.Evidence = r.Passed, r.Evidence
		if !r.Passed && r.OutputSummary != "" {
			res.Evidence += "\noutput (tail):\n" + r.OutputSummary
		}
	case state.CheckFile, state.CheckNotFile:
		r := File(e.opts.Dir, c.Value, c.Type == state.CheckNotFile)
		res.Passed, res.Evidence = r.Passed, r.Evidence
	default: // assertion, quality
		return e.judged(ctx, it, res)
	}
	if res.Passed {
		return res, nil, passed
	}
	return res, nil, failed
}

// judged hands an assertion or quality check to the Judge, or skips it.
func (e *evaluator) judged(ctx context.Context, it *state.ChecklistItem, res ItemResult) (ItemResult, []Skipped, outcome) {
	c := it.Check
	reason := reasonNeedsJudge
	if e.opts.Judge != nil {
		ok, evidence, err := e.opts.Judge.Judge(ctx, it.Item, c)
		if err == nil {
			res.Passed, res.Evidence = ok, evidence
			if ok {
				return res, nil, passed
			}
			return res, nil, failed
		}
		reason = fmt.Sprintf("the judge could not decide: %v", err)
	}
	res.NeedsJudge = true
	res.Evidence = describeJudged(c) + ": " + reason
	return res, []Skipped{{Item: it.Item, Type: c.Type, Reason: reason}}, undecided
}

// describeJudged says what a judge would have to rule on.
func describeJudged(c *state.Check) string {
	if c.Type == state.CheckAssertion {
		return fmt.Sprintf("Assertion %q", c.Value)
	}
	var b strings.Builder
	b.WriteString("Quality check")
	if c.PassThreshold != nil {
		fmt.Fprintf(&b, " (threshold %g)", *c.PassThreshold)
	}
	switch {
	case c.Criteria != "":
		fmt.Fprintf(&b, " %q", c.Criteria)
	case len(c.Rubric) > 0:
		fmt.Fprintf(&b, " with a rubric of %d criteria", len(c.Rubric))
	case c.Value != "":
		fmt.Fprintf(&b, " %q", c.Value)
	}
	return b.String()
}

// timeout is the check's own timeout, else the options', else the default.
// Check timeouts were validated before anything ran.
func (e *evaluator) timeout(c *state.Check) time.Duration {
	if c.Timeout != "" {
		if d, err := ParseTimeout(c.Timeout); err == nil {
			return d
		}
	}
	if e.opts.Timeout > 0 {
		return e.opts.Timeout
	}
	return DefaultTimeout
}
