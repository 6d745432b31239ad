package plan

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/cost"
)

// TestPlanPrices: a plan of either harness may carry cost_per_hour and server_cost_per_hour (a
// number or a string with a currency); a bad price is one of the plan's problems; a plan without
// them writes none.
func TestPlanPrices(t *testing.T) {
	p, err := ParsePlan(mutateJSON(t, func(m map[string]any) { m["cost_per_hour"] = "1.53USD"; m["server_cost_per_hour"] = 0.5 }))
	if err != nil {
		t.Fatal(err)
	}
	if p.CostPerHour != (cost.Price{PerHour: 1.53, Currency: "USD", Given: true}) || p.ServerCostPerHour != (cost.Price{PerHour: 0.5, Given: true}) {
		t.Fatalf("prices %+v %+v", p.CostPerHour, p.ServerCostPerHour)
	}
	for _, bad := range []any{"-1", "1.5 USD", -2, true, 1e9} {
		_, err := ParsePlan(mutateJSON(t, func(m map[string]any) { m["server_cost_per_hour"] = bad }))
		if err == nil || !strings.Contains(err.Error(), "server_cost_per_hour: ") {
			t.Errorf("server_cost_per_hour %v: %v", bad, err)
		}
	}
	plain, err := ParsePlan(mutateJSON(t, func(map[string]any) {}))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(plain); strings.Contains(string(b), "cost_per_hour") {
		t.Errorf("a plan without prices writes one: %s", b)
	}

	b, err := os.ReadFile("../../../docs/linkkeys-capacity-plan.example.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["cost_per_hour"] = "0.2EUR"
	b, _ = json.Marshal(m)
	lp, err := ParseLinkKeysPlan(b)
	if err != nil || lp.CostPerHour != (cost.Price{PerHour: 0.2, Currency: "EUR", Given: true}) || lp.ServerCostPerHour.Given {
		t.Fatalf("LinkKeys plan: %v, %+v", err, lp)
	}
	m["cost_per_hour"] = "0.2EURO_"
	b, _ = json.Marshal(m)
	if _, err := ParseLinkKeysPlan(b); err == nil || !strings.Contains(err.Error(), "cost_per_hour: ") {
		t.Errorf("a bad LinkKeys plan price: %v", err)
	}
}
