package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/engine"
	"github.com/aot-loop/aot/internal/journal"
	"github.com/aot-loop/aot/internal/state"
	"github.com/aot-loop/aot/internal/verify"
)

const (
	// defaultPassThreshold is a quality check's threshold when it has none:
	// the middle of the 1-5 scale, as in the original's simple example
	// ("pass_threshold: 3  # PASS if score 3+ on 1-5 scale").
	defaultPassThreshold = 3.0
	// maxScopeFiles bounds the files a judge is given.
	maxScopeFiles = 200
	// maxJudgeEvidence bounds what is kept of a judge's reasoning (bytes).
	maxJudgeEvidence = 4 << 10
	// maxRationale bounds one criterion's rationale, so that one long
	// rationale does not crowd out the others.
	maxRationale = 600

	unconfirmedSuffix = " (unconfirmed: no terminal to ask)"
	confirmEvent      = journal.Confirm
)

// judge asks the agent in the judge role about the checks a program cannot
// decide, for one verification of the base case. The judge is not the
// worker: it gets the check and the files in its scope, no bindings, and
// looks at the merged work read-only. Its word on an assertion is the
// person's to confirm when the loop would complete; on a quality check only
// its scores count, aot does the arithmetic.
type judge struct {
	agent     agent.Agent
	timeout   time.Duration // bounds one ruling
	dir       string        // the merged work, read-only
	stateFile string        // what the judge's task names
	objective *state.Objective
	// confirmFn asks a person (Options.Confirm); nil: judged assertions
	// are recorded as unconfirmed.
	confirmFn func(ctx context.Context, item, evidence string) (bool, error)
	record    func(journal.Event)              // the verification's events
	say       func(format string, args ...any) // progress for people
	// usage and unknown are what the judge's agents cost, summed as the
	// loop sums it; the verification's caller adds them to its own.
	usage   agent.Usage
	unknown int
	// verdicts are this verification's rulings, so that a second pass after
	// a refusal asks no agent again.
	verdicts map[*state.Check]ruling
	asserted []ruling // assertions the judge passed, in order, to confirm
	refused  map[*state.Check]bool
	replay   bool
}

type ruling struct {
	item     string
	check    *state.Check
	passed   bool
	evidence string
}

// baseCase verifies bc. When it passes with judged assertions, the loop
// would complete: the person confirms them first, and a refusal makes the
// verdict again with that assertion failed (commands run again; no agent
// is asked again).
func baseCase(ctx context.Context, bc *state.BaseCase, opts verify.Options) (verify.Report, error) {
	rep, err := verify.BaseCase(ctx, bc, opts)
	j, ok := opts.Judge.(*judge)
	if !ok || err != nil || !rep.Passed || len(j.asserted) == 0 {
		return rep, err
	}
	refused, err := j.confirm(ctx)
	if err != nil || !refused {
		return rep, err
	}
	j.replay = true
	return verify.BaseCase(ctx, bc, opts)
}

// Judge rules on one assertion or quality check (verify.Judge). An error
// leaves the check undecided: neither passed nor failed.
func (j *judge) Judge(ctx context.Context, item string, c *state.Check) (bool, string, error) {
	if v, ok := j.verdicts[c]; ok && j.replay {
		if j.refused[c] {
			return false, "refused by the person (the judge said: " + v.evidence + ")", nil
		}
		return v.passed, v.evidence, nil
	}
	v, err := j.rule(ctx, item, c)
	if err != nil {
		return false, "", err
	}
	if c.Type == state.CheckAssertion && v.passed {
		j.asserted = append(j.asserted, v)
	}
	if j.verdicts == nil {
		j.verdicts = map[*state.Check]ruling{}
	}
	j.verdicts[c] = v
	return v.passed, v.evidence, nil
}

// rule sends the check to the agent in the judge role and decides it from
// the answer.
func (j *judge) rule(ctx context.Context, item string, c *state.Check) (ruling, error) {
	v := ruling{item: item, check: c}
	dir := j.dir
	files, truncated, err := scopeFiles(dir, c.Scope)
	if err != nil {
		return v, err
	}
	if strings.TrimSpace(c.Scope) != "" && len(files) == 0 {
		v.evidence = fmt.Sprintf("scope %q matches no files: nothing to judge", c.Scope)
		return v, nil
	}
	t := agent.Task{
		Role:      agent.Judge,
		Atom:      agent.AtomRef{ID: "base_case", Description: item, DependsOn: []string{}},
		Objective: agent.Objective{Goal: j.objective.Goal, DefinitionOfDone: j.objective.DefinitionOfDone},
		Bindings:  map[string]agent.Binding{},
		Workdir:   dir,
		Attempt:   1,
		StateFile: j.stateFile,
		Check:     checkJSON(c),
		Files:     files,
	}
	tctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	start := time.Now()
	res, err := j.agent.Run(tctx, t)
	j.spent(engine.AttemptUsage(res, err))
	if err == nil {
		if c.Type == state.CheckQuality {
			v.passed, v.evidence, err = scoreQuality(c, res)
		} else {
			v.passed, v.evidence = res.Passed, bound(res.Evidence, maxJudgeEvidence)
			if v.passed && j.confirmFn == nil {
				v.evidence += unconfirmedSuffix
			}
		}
	}

	ev := journal.Event{Type: journal.AtomFinish, Atom: "base_case", Role: string(agent.Judge), OK: journal.Bool(err == nil && v.passed),
		Reason: item, DurationMS: time.Since(start).Milliseconds()}
	d := engine.UsageFields(&ev, res, err)
	d.Check, d.Files, d.FilesTruncated = c.Type, len(files), truncated
	if err != nil {
		d.Error = err.Error()
	} else {
		d.Evidence = v.evidence
	}
	j.record(ev.With(d))
	return v, err
}

// spent adds what one ruling cost to the judge's spend.
func (j *judge) spent(u agent.Usage) {
	if refused := engine.Tally(&j.usage, &j.unknown, u); refused != "" {
		j.record(engine.UsageRefused(refused))
		j.say("usage reported by an agent was refused: %s", dag.OneLine(refused, 200))
	}
}

// confirm asks the person about each assertion the judge passed, now that
// the base case passes and the loop would complete. Without a terminal
// (Options.Confirm unset) each is recorded as unconfirmed. It reports
// whether any was refused.
func (j *judge) confirm(ctx context.Context) (bool, error) {
	refused := false
	for _, a := range j.asserted {
		if j.confirmFn == nil {
			j.record(journal.Event{Type: confirmEvent, Atom: "base_case", OK: journal.Bool(true), Reason: "unconfirmed: no terminal to ask"}.With(journal.ConfirmData{Item: a.item}))
			continue
		}
		ok, err := j.confirmFn(ctx, a.item, a.evidence)
		if err != nil {
			return false, fmt.Errorf("asking the person to confirm %q: %w", a.item, err)
		}
		reason := "confirmed by the person"
		if !ok {
			reason = "refused by the person"
			if j.refused == nil {
				j.refused = map[*state.Check]bool{}
			}
			j.refused[a.check] = true
			refused = true
		}
		j.record(journal.Event{Type: confirmEvent, Atom: "base_case", OK: journal.Bool(ok), Reason: reason}.With(journal.ConfirmData{Item: a.item}))
	}
	return refused, nil
}

// scoreQuality decides a quality check from the judge's scores, never from
// its "passed": the weighted average of the rubric's criteria (weights as
// given, normalised by their sum) against pass_threshold. A check with
// criteria text and no rubric takes one overall score (several are
// averaged). An answer that misses a criterion, scores an unknown one or
// scores outside 1-5 is invalid: an error, and the check stays undecided.
func scoreQuality(c *state.Check, res agent.Result) (bool, string, error) {
	threshold := defaultPassThreshold
	if c.PassThreshold != nil {
		threshold = *c.PassThreshold
	}
	for _, s := range res.Scores {
		if math.IsNaN(s.Score) || s.Score < 1 || s.Score > 5 {
			return false, "", fmt.Errorf("the judge's answer is invalid: %q scored %s; a score is from 1 to 5", s.Criterion, showScore(s.Score))
		}
	}

	var scores []agent.Score
	var weights []float64
	label := "weighted"
	switch {
	case len(c.Rubric) > 0:
		byName := map[string]agent.Score{}
		known := map[string]bool{}
		for _, r := range c.Rubric {
			known[criterionKey(r.Criterion)] = true
		}
		for _, s := range res.Scores {
			k := criterionKey(s.Criterion)
			if !known[k] {
				return false, "", fmt.Errorf("the judge's answer is invalid: it scored %q, which is not a criterion of the rubric", s.Criterion)
			}
			if _, dup := byName[k]; dup {
				return false, "", fmt.Errorf("the judge's answer is invalid: it scored %q twice", s.Criterion)
			}
			byName[k] = s
		}
		for _, r := range c.Rubric {
			s, ok := byName[criterionKey(r.Criterion)]
			if !ok {
				return false, "", fmt.Errorf("the judge's answer is invalid: it gave no score for the criterion %q", r.Criterion)
			}
			s.Criterion = r.Criterion
			scores = append(scores, s)
		}
		weights = rubricWeights(c.Rubric)
	case len(res.Scores) > 0:
		scores, label = res.Scores, "average"
		if len(scores) == 1 {
			label = "score"
		}
	case res.Score != 0:
		if math.IsNaN(res.Score) || res.Score < 1 || res.Score > 5 {
			return false, "", fmt.Errorf("the judge's answer is invalid: it scored %s; a score is from 1 to 5", showScore(res.Score))
		}
		scores, label = []agent.Score{{Score: res.Score}}, "score"
	default:
		return false, "", errors.New("the judge's answer is invalid: it gave no score")
	}
	if weights == nil {
		weights = make([]float64, len(scores))
		for i := range weights {
			weights[i] = 1
		}
	}

	var sum, total float64
	parts := make([]string, 0, len(scores))
	for i, s := range scores {
		sum += weights[i] * s.Score
		total += weights[i]
		r := dag.OneLine(s.Rationale, maxRationale)
		if s.Criterion == "" { // the one overall score: its number is shown once
			if r != "" {
				parts = append(parts, r)
			}
			continue
		}
		p := s.Criterion + " " + showScore(s.Score)
		if r != "" {
			p += " (" + r + ")"
		}
		parts = append(parts, p)
	}
	avg := sum / total
	// Weights like 0.4 make sums that miss the threshold by a rounding error.
	passed := avg >= threshold-1e-9
	shown, op := showScore(avg), ">="
	if !passed {
		op = "<"
		if shown == showScore(threshold) {
			shown = strconv.FormatFloat(avg, 'f', 4, 64)
		}
	}
	evidence := fmt.Sprintf("%s %s %s %s", label, shown, op, showScore(threshold))
	if len(parts) > 0 {
		evidence += ": " + strings.Join(parts, ", ")
	}
	if r := strings.TrimSpace(res.Evidence); r != "" {
		evidence += "; the judge: " + r
	}
	return passed, bound(evidence, maxJudgeEvidence), nil
}

// rubricWeights are the criteria's weights; a criterion without one (the
// state file's validation asks for one) counts as much as the average
// given weight, or 1 when none is given.
func rubricWeights(rubric []state.RubricCriterion) []float64 {
	var given float64
	n := 0
	for _, r := range rubric {
		if r.Weight > 0 {
			given += r.Weight
			n++
		}
	}
	missing := 1.0
	if n > 0 {
		missing = given / float64(n)
	}
	w := make([]float64, len(rubric))
	for i, r := range rubric {
		w[i] = r.Weight
		if r.Weight <= 0 {
			w[i] = missing
		}
	}
	return w
}

// criterionKey matches a judge's criterion name to the rubric's, forgiving
// case and surrounding space.
func criterionKey(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// showScore shows a score or an average to two decimals at most.
func showScore(x float64) string {
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64)
}

// bound cuts s to at most max bytes, on a rune boundary, marking the cut.
func bound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// scopeFiles lists the files matching a check's scope, a doublestar glob
// relative to dir (a directory stands for the files under it), sorted and
// at most maxScopeFiles of them; truncated says there were more. The
// repository's and aot's own files (.git, .claude/aot-loop*) are never in
// scope. An empty scope is no list: the judge looks at dir.
func scopeFiles(dir, scope string) (files []string, truncated bool, err error) {
	pattern := strings.TrimSpace(scope)
	if pattern == "" {
		return nil, false, nil
	}
	if filepath.IsAbs(pattern) {
		rel, rerr := filepath.Rel(dir, pattern)
		if rerr != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, false, fmt.Errorf("scope %q is outside the project: give a glob relative to it", scope)
		}
		pattern = rel
	}
	pattern = strings.TrimPrefix(path.Clean(filepath.ToSlash(pattern)), "./")
	if pattern == ".." || strings.HasPrefix(pattern, "../") {
		return nil, false, fmt.Errorf("scope %q is outside the project: give a glob relative to it", scope)
	}
	fsys := scopeFS{os.DirFS(dir)}
	if info, serr := fs.Stat(fsys, pattern); serr == nil && info.IsDir() {
		pattern = path.Join(pattern, "**")
	}
	errEnough := errors.New("enough files")
	err = doublestar.GlobWalk(fsys, pattern, func(p string, d fs.DirEntry) error {
		if len(files) == maxScopeFiles {
			truncated = true
			return errEnough
		}
		files = append(files, p)
		return nil
	}, doublestar.WithFilesOnly(), doublestar.WithNoFollow())
	if err != nil && !errors.Is(err, errEnough) {
		return nil, false, fmt.Errorf("scope %q: %w", scope, err)
	}
	sort.Strings(files)
	return files, truncated, nil
}

// scopeFS hides what is never a judge's business: version control and
// aot's own state, journal and logs.
type scopeFS struct{ fsys fs.FS }

func hiddenFromJudge(name string) bool {
	for _, seg := range strings.Split(name, "/") {
		if seg == ".git" {
			return true
		}
	}
	return strings.HasPrefix(name, ".claude/aot-loop")
}

func (s scopeFS) Open(name string) (fs.File, error) {
	if hiddenFromJudge(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return s.fsys.Open(name)
}

func (s scopeFS) Stat(name string) (fs.FileInfo, error) {
	if hiddenFromJudge(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return fs.Stat(s.fsys, name)
}

func (s scopeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if hiddenFromJudge(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	ents, err := fs.ReadDir(s.fsys, name)
	kept := ents[:0]
	for _, e := range ents {
		if !hiddenFromJudge(path.Join(name, e.Name())) {
			kept = append(kept, e)
		}
	}
	return kept, err
}

// checkJSON is the check a judge gets, in the state file's own field names.
func checkJSON(c *state.Check) map[string]any {
	if c == nil {
		return nil
	}
	m := map[string]any{"type": c.Type}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set("value", c.Value)
	set("criteria", c.Criteria)
	set("scope", c.Scope)
	set("timeout", c.Timeout)
	if c.PassThreshold != nil {
		m["pass_threshold"] = *c.PassThreshold
	}
	if len(c.Rubric) > 0 {
		var rubric []map[string]any
		for _, r := range c.Rubric {
			item := map[string]any{"criterion": r.Criterion}
			if r.Description != "" {
				item["description"] = r.Description
			}
			if r.Weight != 0 {
				item["weight"] = r.Weight
			}
			for _, l := range r.Levels {
				levels, _ := item["levels"].([]map[string]any)
				item["levels"] = append(levels, map[string]any{"score": l.Score, "text": l.Text})
			}
			rubric = append(rubric, item)
		}
		m["rubric"] = rubric
	}
	return m
}

// CheckReport is a verification's result with what its judge did.
type CheckReport struct {
	Report  verify.Report   `json:"report"`
	Events  []journal.Event `json:"events,omitempty"` // the judge's rulings and confirmations
	Usage   agent.Usage     `json:"usage"`            // the judge's spend
	Unknown int             `json:"unknown,omitempty"`
	// Logs are the judges' logs by file name, when the checks ran on
	// another machine than the loop's (an aot worker hands them back).
	Logs map[string]string `json:"logs,omitempty"`
}

// CheckBaseCase verifies s's base case in dir as a local run does, its
// judged checks by judgeAgent (an agent in the judge role; nil: they count as
// not passed, not judged). A driver whose checks run elsewhere (an aot
// worker) calls it there and hands the report to its Core's Host.Checks.
func CheckBaseCase(ctx context.Context, s *state.State, dir string, judgeAgent agent.Agent, agentTimeout, checkTimeout time.Duration) (CheckReport, error) {
	if agentTimeout <= 0 {
		agentTimeout = engine.DefaultAgentTimeout
	}
	if checkTimeout <= 0 {
		checkTimeout = verify.DefaultTimeout
	}
	var events []journal.Event
	j := &judge{agent: judgeAgent, timeout: agentTimeout, dir: dir, objective: &s.Objective,
		record: func(ev journal.Event) {
			if ev.Iteration == 0 {
				ev.Iteration = s.Control.Iteration
			}
			if ev.Time.IsZero() {
				ev.Time = time.Now()
			}
			events = append(events, ev)
		},
		say: func(string, ...any) {}}
	opts := verify.Options{Dir: dir, Timeout: checkTimeout}
	if judgeAgent != nil {
		opts.Judge = j
	}
	rep, err := baseCase(ctx, s.Objective.BaseCase, opts)
	return CheckReport{Report: rep, Events: events, Usage: j.usage, Unknown: j.unknown}, err
}
