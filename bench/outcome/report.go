//go:build linux

package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Row is one runner on one profile and size, over the seeds.
type Row struct {
	Profile, Runner string
	Size            int
	Runs            int
	Complete        int
	False           int
	Calls           float64 // median
	Tokens          float64 // median, spent by the sim
	Reported        float64 // median, counted by the runner
	Wall            time.Duration
	Left            int
	Reasons         map[string]int
	Errors          []string
}

// CallsPerDeliverable is the median of calls over deliverables.
func (r Row) CallsPerDeliverable() float64 { return r.Calls / float64(r.Size) }

// Rate is the completion rate.
func (r Row) Rate() float64 {
	if r.Runs == 0 {
		return 0
	}
	return float64(r.Complete) / float64(r.Runs)
}

// Aggregate groups results by profile, size and runner, in the run's order.
func Aggregate(c Config, results []Result) []Row {
	var rows []Row
	for _, p := range c.Profiles {
		for _, n := range c.Sizes {
			for _, runner := range c.runners() {
				row := Row{Profile: p, Size: n, Runner: runner, Reasons: map[string]int{}}
				var calls, tokens, reported, wall []float64
				for _, r := range results {
					if r.Profile != p || r.Size != n || r.Runner != runner {
						continue
					}
					if r.Err != "" {
						row.Errors = append(row.Errors, fmt.Sprintf("seed %d: %s", r.Seed, r.Err))
						continue
					}
					row.Runs++
					if r.Complete {
						row.Complete++
					}
					if r.False() {
						row.False++
					}
					row.Left += r.Left
					row.Reasons[reasonKey(r.Reason)]++
					calls = append(calls, float64(r.Calls))
					tokens = append(tokens, float64(r.Tokens))
					reported = append(reported, float64(r.Reported))
					wall = append(wall, float64(r.Wall))
				}
				row.Calls, row.Tokens, row.Reported = median(calls), median(tokens), median(reported)
				row.Wall = time.Duration(median(wall))
				rows = append(rows, row)
			}
		}
	}
	return rows
}

// reasonKey shortens a baseline's reason ("said done after 3 calls") to its
// kind.
func reasonKey(r string) string {
	for _, p := range []string{"said done", "checks passed", "gave up", "killed by the harness"} {
		if strings.HasPrefix(r, p) {
			return p
		}
	}
	return r
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Markdown writes the table.
func Markdown(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| profile | N | runner | completed | false completions | calls (median) | calls / N | tokens (median) | tokens counted by runner | wall s (median) | processes left | stop reasons |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %s | %d/%d (%.0f%%) | %d | %.1f | %.2f | %s | %s | %.2f | %d | %s |\n",
			r.Profile, r.Size, r.Runner, r.Complete, r.Runs, 100*r.Rate(), r.False, r.Calls, r.CallsPerDeliverable(),
			kilo(r.Tokens), kilo(r.Reported), r.Wall.Seconds(), r.Left, reasons(r))
	}
}

func kilo(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

func reasons(r Row) string {
	keys := make([]string, 0, len(r.Reasons))
	for k := range r.Reasons {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if r.Reasons[keys[i]] != r.Reasons[keys[j]] {
			return r.Reasons[keys[i]] > r.Reasons[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Reasons[k]))
	}
	for _, e := range r.Errors {
		parts = append(parts, "ERROR "+oneLine(e))
	}
	return strings.ReplaceAll(strings.Join(parts, ", "), "|", "/")
}

// Target is one of the benchmark's targets, evaluated on the rows.
type Target struct {
	Name   string
	Met    bool
	Detail string
}

// Targets evaluates the targets on aot's rows: no false completion; at
// least 95% completion per profile up to 16 deliverables, and never below the
// check-gated baseline (with a margin of slack seeds); at most 3 agent calls
// per deliverable (median); no process left.
func Targets(rows []Row, slack int) []Target {
	var out []Target
	add := func(name string, bad []string) {
		t := Target{Name: name, Met: len(bad) == 0}
		if len(bad) > 0 {
			t.Detail = strings.Join(bad, "; ")
		}
		out = append(out, t)
	}
	base := map[string]Row{}
	for _, r := range rows {
		if r.Runner == RunnerChecksPass {
			base[fmt.Sprintf("%s/%d", r.Profile, r.Size)] = r
		}
	}
	var falses, rate, vsBase, calls, left []string
	for _, r := range rows {
		if !strings.HasPrefix(r.Runner, "aot") {
			continue
		}
		at := fmt.Sprintf("%s N=%d %s", r.Profile, r.Size, r.Runner)
		if r.False > 0 {
			falses = append(falses, fmt.Sprintf("%s: %d", at, r.False))
		}
		if r.Size <= 16 && r.Rate() < 0.95 {
			rate = append(rate, fmt.Sprintf("%s: %d/%d", at, r.Complete, r.Runs))
		}
		if b, ok := base[fmt.Sprintf("%s/%d", r.Profile, r.Size)]; ok && r.Complete < b.Complete-slack {
			vsBase = append(vsBase, fmt.Sprintf("%s: %d/%d against %d/%d", at, r.Complete, r.Runs, b.Complete, b.Runs))
		}
		if r.CallsPerDeliverable() > 3 {
			calls = append(calls, fmt.Sprintf("%s: %.2f", at, r.CallsPerDeliverable()))
		}
		if r.Left > 0 {
			left = append(left, fmt.Sprintf("%s: %d", at, r.Left))
		}
	}
	add("aot: 0 false completions", falses)
	add("aot: completion >= 95% per profile, up to 16 deliverables", rate)
	add(fmt.Sprintf("aot: completions >= the check-gated baseline's (- %d seeds)", slack), vsBase)
	add("aot: at most 3 agent calls per deliverable (median)", calls)
	add("aot: 0 processes left", left)
	return out
}

// WriteTargets writes the targets as a list.
func WriteTargets(w io.Writer, ts []Target) {
	for _, t := range ts {
		mark := "met"
		if !t.Met {
			mark = "NOT met"
		}
		fmt.Fprintf(w, "- %s: **%s**", t.Name, mark)
		if t.Detail != "" {
			fmt.Fprintf(w, " (%s)", t.Detail)
		}
		fmt.Fprintln(w)
	}
}
