package align

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrCancelled is a person ending the dialogue without writing.
var ErrCancelled = errors.New("align cancelled: nothing written")

// Dialogue is the interactive form: questions and prompts go to Out, the
// person's lines come from In.
type Dialogue struct {
	Model Proposer
	In    *bufio.Reader
	Out   io.Writer
	// Rounds bounds how often the model is asked with answers to its
	// questions (the first proposal included).
	Rounds int
	// Target names the file to be written, in the final question.
	Target string
}

// Run agrees on a proposal with the person: the model's questions, then
// each part accepted, edited or redone, then the gate; it ends when the
// person says to write a proposal that passes it.
func (d *Dialogue) Run(ctx context.Context, request string) (Outcome, error) {
	c := &conversation{request: request}
	fmt.Fprintln(d.Out, "Asking the model for a proposal…")
	prop, err := d.Model.Propose(ctx, c.text())
	if err != nil {
		return Outcome{}, err
	}
	for asked := 1; len(prop.Clarifications) > 0; asked++ {
		if asked >= d.Rounds {
			fmt.Fprintf(d.Out, "\nThe model still asks %d question(s); they stay open (redo a part with a comment to tell it more).\n", len(prop.Clarifications))
			break
		}
		fmt.Fprintln(d.Out, "\nThe model asks (an empty answer leaves a question to it):")
		answers := make([]string, len(prop.Clarifications))
		for i, q := range prop.Clarifications {
			fmt.Fprintf(d.Out, "  %d. %s\n", i+1, oneLine(q))
			if answers[i], err = d.line("  answer: "); err != nil {
				return Outcome{}, err
			}
		}
		if c.answer(prop.Clarifications, answers) == 0 {
			break
		}
		fmt.Fprintln(d.Out, "Asking the model again with your answers…")
		if prop, err = d.Model.Propose(ctx, c.text()); err != nil {
			return Outcome{}, err
		}
	}
	for {
		if prop, err = d.review(ctx, c, prop); err != nil {
			return Outcome{}, err
		}
		s := prop.State(request, c.qa)
		if probs := Problems(s); len(probs) > 0 {
			fmt.Fprintln(d.Out, "\nThe proposal does not pass aot gate:")
			for _, p := range probs {
				fmt.Fprintf(d.Out, "  - %s\n", p)
			}
			switch ans, err := d.choose("f let the model fix it, e edit it yourself, q quit: ", "f", "e", "q"); {
			case err != nil:
				return Outcome{}, err
			case ans == "q":
				return Outcome{}, ErrCancelled
			case ans == "f":
				fmt.Fprintln(d.Out, "Asking the model to fix it…")
				fixed, err := d.Model.Propose(ctx, c.revision(prop, "It does not pass the gate:\n- "+strings.Join(probs, "\n- ")+"\nFix exactly these problems."))
				if err != nil {
					fmt.Fprintf(d.Out, "The model could not: %v\n", err)
				} else {
					prop = fixed
				}
			}
			continue
		}
		fmt.Fprintf(d.Out, "\nThe proposal passes aot gate: %d check(s), %d atom(s).\n", len(prop.BaseCase.Checklist), len(prop.Atoms))
		switch ans, err := d.choose(fmt.Sprintf("Write %s? y (or Enter) yes, e edit again, q quit: ", d.Target), "y", "e", "q"); {
		case err != nil:
			return Outcome{}, err
		case ans == "q":
			return Outcome{}, ErrCancelled
		case ans == "y":
			return Outcome{Proposal: prop, QA: c.qa, State: s, Open: prop.Clarifications}, nil
		}
	}
}

// part is one piece of a proposal the person reviews.
type part struct {
	title string // as shown
	key   string // the answer format's key, for the model
	show  func(p *Proposal) string
	edit  func(d *Dialogue, p *Proposal) error
	take  func(dst *Proposal, src Proposal) // copies this part from a redone proposal
}

var parts = []part{
	textPart("Goal", "goal", func(p *Proposal) *string { return &p.Goal }),
	textPart("Background intent", "background_intent", func(p *Proposal) *string { return &p.BackgroundIntent }),
	textPart("Deliverables", "deliverables", func(p *Proposal) *string { return &p.Deliverables }),
	listPart("Scope: in", "scope.in", func(p *Proposal) *[]string { return &p.Scope.In }),
	listPart("Scope: out", "scope.out", func(p *Proposal) *[]string { return &p.Scope.Out }),
	checklistPart(),
	{
		title: "Definition of done", key: "definition_of_done",
		show: func(p *Proposal) string { return "  " + p.Done() + "\n" },
		edit: func(d *Dialogue, p *Proposal) error {
			return d.editText("definition_of_done", &p.DefinitionOfDone)
		},
		take: func(dst *Proposal, src Proposal) { dst.DefinitionOfDone = src.DefinitionOfDone },
	},
	atomsPart(),
}

// review walks the parts: each is accepted, edited or redone by the model
// with the person's comment, and shown again after a change.
func (d *Dialogue) review(ctx context.Context, c *conversation, prop Proposal) (Proposal, error) {
	for _, pt := range parts {
		for {
			fmt.Fprintf(d.Out, "\n── %s ──\n%s", pt.title, pt.show(&prop))
			ans, err := d.choose("a (or Enter) accept, e edit, r redo with a comment: ", "a", "e", "r")
			if err != nil {
				return prop, err
			}
			if ans == "a" {
				break
			}
			if ans == "e" {
				if err := pt.edit(d, &prop); err != nil {
					return prop, err
				}
				continue
			}
			comment, err := d.line("comment for the model: ")
			if err != nil {
				return prop, err
			}
			fmt.Fprintf(d.Out, "Asking the model to redo the %s…\n", strings.ToLower(pt.title))
			redone, err := d.Model.Propose(ctx, c.revision(prop, fmt.Sprintf("Revise only %q (%s); keep every other part as it is. The person says: %s", pt.key, pt.title, comment)))
			if err != nil {
				fmt.Fprintf(d.Out, "The model could not: %v\n", err)
				continue
			}
			pt.take(&prop, redone)
		}
	}
	return prop, nil
}

func textPart(title, key string, field func(p *Proposal) *string) part {
	return part{
		title: title, key: key,
		show: func(p *Proposal) string { return "  " + oneLine(*field(p)) + "\n" },
		edit: func(d *Dialogue, p *Proposal) error { return d.editText(key, field(p)) },
		take: func(dst *Proposal, src Proposal) { *field(dst) = *field(&src) },
	}
}

func (d *Dialogue) editText(key string, dst *string) error {
	v, err := d.line("new " + key + " (one line; empty keeps it): ")
	if err == nil && strings.TrimSpace(v) != "" {
		*dst = strings.TrimSpace(v)
	}
	return err
}

func listPart(title, key string, field func(p *Proposal) *[]string) part {
	return part{
		title: title, key: key,
		show: func(p *Proposal) string { return numbered(*field(p), func(s string) string { return s }) },
		edit: func(d *Dialogue, p *Proposal) error {
			return d.editList("+TEXT adds a line", func() string { return numbered(*field(p), func(s string) string { return s }) },
				func(cmd string) error {
					list := field(p)
					if text, ok := strings.CutPrefix(cmd, "+"); ok {
						*list = append(*list, strings.TrimSpace(text))
						return nil
					}
					i, err := index(cmd, len(*list))
					if err == nil {
						*list = append((*list)[:i:i], (*list)[i+1:]...)
					}
					return err
				})
		},
		take: func(dst *Proposal, src Proposal) { *field(dst) = *field(&src) },
	}
}

func checklistPart() part {
	show := func(p *Proposal) string { return numbered(p.BaseCase.Checklist, describeItem) }
	return part{
		title: "Base case (checklist)", key: "base_case",
		show: show,
		edit: func(d *Dialogue, p *Proposal) error {
			return d.editList("+[NAME=]TYPE:VALUE adds a check (types: command, not_command, file, not_file, assertion, quality)",
				func() string { return show(p) },
				func(cmd string) error {
					list := &p.BaseCase.Checklist
					if spec, ok := strings.CutPrefix(cmd, "+"); ok {
						it, err := ParseCheck(strings.TrimSpace(spec))
						if err == nil {
							*list = append(*list, it)
						}
						return err
					}
					i, err := index(cmd, len(*list))
					if err == nil {
						*list = append((*list)[:i:i], (*list)[i+1:]...)
					}
					return err
				})
		},
		take: func(dst *Proposal, src Proposal) { dst.BaseCase = src.BaseCase },
	}
}

func atomsPart() part {
	show := func(p *Proposal) string { return numbered(p.Atoms, describeAtom) }
	return part{
		title: "First atoms", key: "atoms",
		show: show,
		edit: func(d *Dialogue, p *Proposal) error {
			return d.editList("-ID also removes an atom, +ID=DESCRIPTION adds one, deps ID=A1,A2 sets its dependencies",
				func() string { return show(p) },
				func(cmd string) error {
					if spec, ok := strings.CutPrefix(cmd, "+"); ok {
						id, desc, ok := strings.Cut(spec, "=")
						id, desc = strings.TrimSpace(id), strings.TrimSpace(desc)
						if !ok || id == "" || desc == "" {
							return fmt.Errorf("%q: want +ID=DESCRIPTION", cmd)
						}
						p.Atoms = append(p.Atoms, Atom{ID: id, Description: desc, DependsOn: []string{}})
						return nil
					}
					if spec, ok := strings.CutPrefix(cmd, "deps "); ok {
						id, list, _ := strings.Cut(spec, "=")
						for i := range p.Atoms {
							if p.Atoms[i].ID == strings.TrimSpace(id) {
								p.Atoms[i].DependsOn = splitIDs(list)
								return nil
							}
						}
						return fmt.Errorf("%q: no atom %q", cmd, strings.TrimSpace(id))
					}
					id := strings.TrimSpace(strings.TrimPrefix(cmd, "-"))
					if i, err := index(cmd, len(p.Atoms)); err == nil {
						id = p.Atoms[i].ID
					}
					n := len(p.Atoms)
					var touched []string
					p.Atoms, touched = removeAtom(p.Atoms, id)
					if len(p.Atoms) == n {
						return fmt.Errorf("%q: no atom %q", cmd, id)
					}
					if len(touched) > 0 {
						fmt.Fprintf(d.Out, "  (removed %s from the dependencies of %s)\n", id, strings.Join(touched, ", "))
					}
					return nil
				})
		},
		take: func(dst *Proposal, src Proposal) { dst.Atoms = src.Atoms },
	}
}

// editList reads edit commands until an empty line: -N removes item N,
// anything else goes to apply; the list is shown after each change.
func (d *Dialogue) editList(help string, show func() string, apply func(cmd string) error) error {
	fmt.Fprintf(d.Out, "  -N removes item N, %s; an empty line ends the edit.\n", help)
	for {
		cmd, err := d.line("  edit: ")
		if err != nil {
			return err
		}
		cmd = strings.TrimSpace(cmd)
		if cmd == "" {
			return nil
		}
		if !strings.HasPrefix(cmd, "-") && !strings.HasPrefix(cmd, "+") && !strings.HasPrefix(cmd, "deps ") {
			fmt.Fprintf(d.Out, "  %q: start with - to remove or + to add\n", cmd)
			continue
		}
		if err := apply(cmd); err != nil {
			fmt.Fprintf(d.Out, "  %v\n", err)
			continue
		}
		fmt.Fprint(d.Out, show())
	}
}

// index reads "-N" as the index of item N of n.
func index(cmd string, n int) (int, error) {
	k, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(cmd, "-")))
	if err != nil || k < 1 || k > n {
		return 0, fmt.Errorf("%q: want -N with N from 1 to %d", cmd, n)
	}
	return k - 1, nil
}

func splitIDs(list string) []string {
	out := []string{}
	for _, id := range strings.Split(list, ",") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}

func numbered[T any](list []T, describe func(T) string) string {
	if len(list) == 0 {
		return "  (none)\n"
	}
	var b strings.Builder
	for i, v := range list {
		fmt.Fprintf(&b, "  %d. %s\n", i+1, describe(v))
	}
	return b.String()
}

func describeAtom(a Atom) string {
	s := a.ID + ": " + oneLine(a.Description)
	if len(a.DependsOn) > 0 {
		s += " (after " + strings.Join(a.DependsOn, ", ") + ")"
	}
	return s
}

func describeItem(it Item) string {
	switch {
	case it.Check != nil:
		c := it.Check
		what := c.Value
		if what == "" {
			what = c.Criteria
		}
		if what == "" && len(c.Rubric) > 0 {
			names := make([]string, 0, len(c.Rubric))
			for _, r := range c.Rubric {
				names = append(names, r.Criterion)
			}
			what = "rubric: " + strings.Join(names, ", ")
		}
		return fmt.Sprintf("%s [%s: %s]", oneLine(it.Item), c.Type, oneLine(what))
	case it.Group != nil:
		return fmt.Sprintf("%s [all of %d checks]", oneLine(it.Item), len(it.Group))
	case it.AnyOf != nil:
		return fmt.Sprintf("%s [any of %d checks]", oneLine(it.Item), len(it.AnyOf))
	}
	return oneLine(it.Item) + " [no check]"
}

// choose asks until the answer is one of the letters; Enter is the first.
func (d *Dialogue) choose(prompt string, letters ...string) (string, error) {
	for {
		ans, err := d.line(prompt)
		if err != nil {
			return "", err
		}
		ans = strings.ToLower(strings.TrimSpace(ans))
		if ans == "" {
			return letters[0], nil
		}
		for _, l := range letters {
			if ans == l || strings.HasPrefix(ans, l) && len(ans) > 1 && isWord(ans, l) {
				return l, nil
			}
		}
		fmt.Fprintf(d.Out, "  please answer %s\n", strings.Join(letters, ", "))
	}
}

// isWord accepts a word spelled out for its letter (yes, edit, quit, ...).
func isWord(ans, letter string) bool {
	for _, w := range []string{"accept", "edit", "redo", "yes", "quit", "fix"} {
		if strings.HasPrefix(w, letter) && ans == w {
			return true
		}
	}
	return false
}

// line prompts and reads one line; input that ends is an error.
func (d *Dialogue) line(prompt string) (string, error) {
	fmt.Fprint(d.Out, prompt)
	s, err := d.In.ReadString('\n')
	if err != nil && (s == "" || !errors.Is(err, io.EOF)) {
		if errors.Is(err, io.EOF) {
			fmt.Fprintln(d.Out)
			return "", errors.New("the input ended before the dialogue did: nothing written")
		}
		return "", err
	}
	return strings.TrimRight(s, "\r\n"), nil
}
