package history

import (
	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/journal"
)

// Spend is what agents' runs cost: every finished attempt counts, failed
// ones too; an attempt whose usage nobody reported is counted as unknown,
// never as zero.
type Spend struct {
	Attempts   int     `json:"attempts"`
	Unknown    int     `json:"unknown_attempts"`
	Tokens     int64   `json:"tokens"`
	CostUSD    float64 `json:"cost_usd"`
	DurationMS int64   `json:"duration_ms"`
}

// Spending is a loop's spend in total, per atom and per role.
type Spending struct {
	Total Spend            `json:"total"`
	Atoms map[string]Spend `json:"atoms"`
	Roles map[string]Spend `json:"roles"`
}

// Add takes one more event into the sums. The sums saturate as the
// engine's do (agent.AddCount, agent.AddCost): a journal's numbers, however
// large, never wrap a total negative or make it infinite.
func (sp *Spending) Add(ev journal.Event) {
	if sp.Atoms == nil {
		sp.Atoms, sp.Roles = map[string]Spend{}, map[string]Spend{}
	}
	sp.Total.Tokens = agent.AddCount(sp.Total.Tokens, ev.Tokens)
	sp.Total.CostUSD = agent.AddCost(sp.Total.CostUSD, ev.CostUSD)
	if ev.Type != journal.AtomFinish {
		return
	}
	unknown := journal.DataOf[journal.AtomFinishData](ev).UsageUnknown
	count := func(s Spend) Spend {
		s.Attempts++
		s.Tokens = agent.AddCount(s.Tokens, ev.Tokens)
		s.CostUSD = agent.AddCost(s.CostUSD, ev.CostUSD)
		s.DurationMS = agent.AddCount(s.DurationMS, ev.DurationMS)
		if unknown {
			s.Unknown++
		}
		return s
	}
	sp.Total.Attempts++
	sp.Total.DurationMS = agent.AddCount(sp.Total.DurationMS, ev.DurationMS)
	if unknown {
		sp.Total.Unknown++
	}
	if ev.Atom != "" {
		sp.Atoms[ev.Atom] = count(sp.Atoms[ev.Atom])
	}
	if ev.Role != "" {
		sp.Roles[ev.Role] = count(sp.Roles[ev.Role])
	}
}

// SpendOf sums a whole journal.
func SpendOf(events []journal.Event) Spending {
	sp := Spending{Atoms: map[string]Spend{}, Roles: map[string]Spend{}}
	for _, ev := range events {
		sp.Add(ev)
	}
	return sp
}
