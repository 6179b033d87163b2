package agent

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestUsageSumsSaturate: totals stop at the largest value instead of
// wrapping negative or becoming infinite; bad parts are not added.
func TestUsageSumsSaturate(t *testing.T) {
	big := Usage{InputTokens: 9e18, OutputTokens: 9e18, CostUSD: math.MaxFloat64}
	got := big.Plus(big)
	if got.InputTokens != math.MaxInt64 || got.OutputTokens != math.MaxInt64 || got.CostUSD != math.MaxFloat64 || got.Tokens() != math.MaxInt64 {
		t.Fatalf("9e18 + 9e18 = %+v (tokens %d)", got, got.Tokens())
	}
	if c := AddCost(1, math.Inf(1)); c != 1 {
		t.Fatalf("1 + Inf = %v; want the Inf left out", c)
	}
	if c := AddCost(math.NaN(), -3); c != 0 {
		t.Fatalf("NaN + -3 = %v", c)
	}
	if n := AddCount(5, -7); n != 5 {
		t.Fatalf("5 + -7 = %d; want the negative left out", n)
	}
}

// TestAnAnswersUsageIsReadFieldByField: a bad field is refused with a
// note, the others count, and the notes survive a JSON round trip (a
// Temporal activity's result).
func TestAnAnswersUsageIsReadFieldByField(t *testing.T) {
	var u Usage
	if err := json.Unmarshal([]byte(`{"input_tokens": -5, "output_tokens": 7, "cost_usd": "free"}`), &u); err != nil {
		t.Fatal(err)
	}
	if u.InputTokens != 0 || u.OutputTokens != 7 || u.CostUSD != 0 ||
		u.Refused != `input_tokens -5 is negative, not counted; cost_usd "free" is not a number, not counted` {
		t.Fatalf("usage = %+v", u)
	}
	data, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	var back Usage
	if err := json.Unmarshal(data, &back); err != nil || back != (Usage{OutputTokens: 7, Known: true, Refused: u.Refused}) {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	s := sumUsage(strings.NewReader(`{"input_tokens": 1e19, "output_tokens": 2}` + "\n"))
	if s.InputTokens != math.MaxInt64 || s.OutputTokens != 2 || !strings.HasPrefix(s.Refused, "usage file line 1: input_tokens 1e19 is past the largest count") {
		t.Fatalf("a count past int64: %+v", s)
	}
}
