package state

import (
	"strings"
	"testing"
)

func TestAtomScopeRoundTrips(t *testing.T) {
	s := New(Objective{Goal: "g", BackgroundIntent: "b", Deliverables: "d", DefinitionOfDone: "c",
		BaseCase: &BaseCase{Legacy: &Check{Type: CheckCommand, Value: "true"}}},
		[]Atom{{ID: "A", Description: "a", DependsOn: []string{}, Scope: []string{"src/**", "docs/*.md"}}}, "p")
	data := Marshal(s)
	if !strings.Contains(string(data), "scope:") {
		t.Fatalf("no scope written:\n%s", data)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Atom("A").Scope; len(got) != 2 || got[0] != "src/**" || got[1] != "docs/*.md" {
		t.Fatalf("scope read back as %v", got)
	}
	c := Clone(back)
	c.Atom("A").Scope[0] = "changed"
	if back.Atom("A").Scope[0] != "src/**" {
		t.Fatal("Clone shares the scope slice")
	}
}
