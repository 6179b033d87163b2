package ccw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The progress folder's Markdown files are for people; summary.md's front
// matter is also what Recover reads the API's fields back from.

func renderDevelop(l Loop) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Develop: %s\n\n", oneLine(l.Title))
	ss := skill(l)
	d := ss.Develop
	fmt.Fprintf(&b, "%d of %d done", d.Completed, d.Total)
	if d.CurrentTask != nil {
		fmt.Fprintf(&b, "; working on %s", *d.CurrentTask)
	}
	if d.LastProgressAt != nil {
		fmt.Fprintf(&b, "; last progress %s", stamp(*d.LastProgressAt))
	}
	b.WriteString(".\n\n")
	if len(d.Tasks) == 0 {
		b.WriteString("No tasks.\n")
		return b.Bytes()
	}
	b.WriteString("| task | status | runs | files changed | summary |\n|---|---|---|---|---|\n")
	for _, t := range d.Tasks {
		summary := t.Summary
		if summary == "" {
			summary = t.LastFailure
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", cell(t.ID), t.Status, t.Attempts, cell(strings.Join(t.FilesChanged, ", ")), cell(summary))
	}
	return b.Bytes()
}

func renderDebug(l Loop) []byte {
	var b bytes.Buffer
	d := skill(l).Debug
	b.WriteString("# Debug\n\n")
	if d.ActiveBug != nil {
		fmt.Fprintf(&b, "Active: %s\n\n", oneLine(*d.ActiveBug))
	}
	fmt.Fprintf(&b, "%d hypotheses (OR choices), %d switches.\n", d.HypothesesCount, d.Iteration)
	group := ""
	for _, h := range d.Hypotheses {
		if h.ORGroup != group {
			group = h.ORGroup
			fmt.Fprintf(&b, "\n## OR group %s\n\n", oneLine(group))
		}
		fmt.Fprintf(&b, "- %s (%d): %s", oneLine(h.ID), h.Likelihood, h.Status)
		if h.VerdictReason != nil {
			fmt.Fprintf(&b, ": %s", oneLine(*h.VerdictReason))
		}
		if h.Description != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(h.Description))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func renderValidate(l Loop) []byte {
	var b bytes.Buffer
	v := skill(l).Validate
	b.WriteString("# Validate\n\n")
	if v.LastRunAt == nil {
		b.WriteString("Not verified yet.\n")
		return b.Bytes()
	}
	verdict := "failed"
	if v.Passed {
		verdict = "passed"
	}
	fmt.Fprintf(&b, "Base case %s at %s (verification %d).\n", verdict, stamp(*v.LastRunAt), v.Runs)
	if v.PassRate != nil {
		fmt.Fprintf(&b, "Pass rate: %g%% of %s.\n", *v.PassRate, v.PassRateBasis)
	}
	if v.Coverage != nil {
		fmt.Fprintf(&b, "Coverage: %g%%.\n", *v.Coverage)
	} else {
		b.WriteString("Coverage: unknown (no output reported it).\n")
	}
	b.WriteString("\n## Checklist\n\n")
	for _, it := range v.Checklist {
		mark := " "
		if it.Passed {
			mark = "x"
		}
		fmt.Fprintf(&b, "- [%s] %s: %s\n", mark, oneLine(it.Item), oneLine(firstLine(it.Evidence)))
	}
	if len(v.TestResults) > 0 {
		counts := map[string]int{}
		for _, t := range v.TestResults {
			counts[t.Status]++
		}
		fmt.Fprintf(&b, "\n## Tests\n\n%d passed, %d failed, %d skipped.\n", counts[TestPassed], counts[TestFailed], counts[TestSkipped])
		for _, t := range v.TestResults {
			if t.Status != TestFailed {
				continue
			}
			msg := ""
			if t.ErrorMessage != nil {
				msg = ": " + oneLine(firstLine(*t.ErrorMessage))
			}
			fmt.Fprintf(&b, "- %s%s\n", oneLine(testID(t)), msg)
		}
	}
	return b.Bytes()
}

// frontMatter is the part of the document summary.md keeps for Recover:
// what the API owns and the journal cannot give back.
type frontMatter struct {
	LoopID      string    `json:"loop_id"`
	Title       string    `json:"title"`
	Description string    `json:"description"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

// frontMatterKeys are written in this order, one "key: JSON value" line
// each (which YAML reads too).
var frontMatterKeys = []string{"loop_id", "title", "description", "status", "created_at"}

func renderSummary(l Loop) []byte {
	var b bytes.Buffer
	raw, _ := json.Marshal(frontMatter{LoopID: l.LoopID, Title: l.Title, Description: l.Description, Status: l.Status, CreatedAt: l.CreatedAt})
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(raw, &fields)
	b.WriteString("---\n")
	for _, k := range frontMatterKeys {
		fmt.Fprintf(&b, "%s: %s\n", k, fields[k])
	}
	b.WriteString("---\n\n")
	fmt.Fprintf(&b, "# %s\n\n", oneLine(l.Title))
	if l.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", l.Description)
	}
	fmt.Fprintf(&b, "- Status: %s", l.Status)
	if l.FailureReason != "" {
		fmt.Fprintf(&b, " (%s)", oneLine(l.FailureReason))
	}
	fmt.Fprintf(&b, "\n- Iteration %d of %d\n", l.CurrentIteration, l.MaxIterations)
	fmt.Fprintf(&b, "- Created %s, updated %s\n", stamp(l.CreatedAt), stamp(l.UpdatedAt))
	if l.CompletedAt != nil {
		fmt.Fprintf(&b, "- Ended %s\n", stamp(*l.CompletedAt))
	}
	ss := skill(l)
	fmt.Fprintf(&b, "- Tasks: %d of %d done\n", ss.Develop.Completed, ss.Develop.Total)
	tokens, cost := int64(0), 0.0
	for _, t := range ss.Develop.Tasks {
		tokens, cost = tokens+t.Tokens, cost+t.CostUSD
	}
	fmt.Fprintf(&b, "- Agents' usage on tasks: %d tokens, $%.4f\n", tokens, cost)
	if s := ss.Summary; s != nil {
		fmt.Fprintf(&b, "- Ran %s; %d hypotheses confirmed, %d rejected\n", time.Duration(s.Duration)*time.Millisecond, s.Debug.Confirmed, s.Debug.Rejected)
	}
	return b.Bytes()
}

// parseFrontMatter reads summary.md's front matter; ok is false when it has
// none or a line of it does not read.
func parseFrontMatter(data []byte) (fm frontMatter, ok bool) {
	rest, found := bytes.CutPrefix(data, []byte("---\n"))
	if !found {
		return fm, false
	}
	head, _, found := bytes.Cut(rest, []byte("\n---\n"))
	if !found {
		return fm, false
	}
	fields := map[string]json.RawMessage{}
	for _, line := range bytes.Split(head, []byte("\n")) {
		k, v, found := bytes.Cut(line, []byte(": "))
		if !found || !json.Valid(v) {
			return fm, false
		}
		fields[string(k)] = json.RawMessage(v)
	}
	raw, _ := json.Marshal(fields)
	if json.Unmarshal(raw, &fm) != nil || fm.LoopID == "" {
		return fm, false
	}
	return fm, true
}

func skill(l Loop) *SkillState {
	if l.SkillState == nil {
		return &SkillState{}
	}
	return l.SkillState
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.Format(time.RFC3339)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// oneLine keeps text on its line of Markdown.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cell is text fit for a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(oneLine(s), "|", `\|`)
}
