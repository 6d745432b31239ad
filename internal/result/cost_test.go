package result

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/cost"
)

// TestCostSurvivesTheFile: a cost priced from an envelope in memory (its times carrying monotonic
// readings) recomputes from the same envelope read back from its JSON, and a changed wall time or
// capacity is refused.
func TestCostSurvivesTheFile(t *testing.T) {
	start := time.Now()
	e := &Envelope{Format: Format, Harness: "keycast", Command: "run", StartedAt: start, EndedAt: start.Add(1500 * time.Millisecond)}
	capa := cost.Capacity{Requests: 3000}
	if err := e.SetCost([]cost.Price{{PerHour: 2.4, Currency: "USD", Given: true}}, cost.Price{}, capa); err != nil {
		t.Fatal(err)
	}
	if e.Cost == nil || e.Cost.Seconds != 1.5 || e.Cost.Server != nil || len(e.Cost.Units) != 1 {
		t.Fatalf("cost %+v", e.Cost)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var back Envelope
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.CheckCost(capa); err != nil {
		t.Fatalf("the cost does not recompute after its file's round trip: %v", err)
	}
	if err := back.CheckCost(cost.Capacity{Requests: 2999}); err == nil || !strings.Contains(err.Error(), "capacity") {
		t.Errorf("a changed capacity: %v", err)
	}
	back.EndedAt = back.EndedAt.Add(time.Second)
	if err := back.CheckCost(capa); err == nil || !strings.Contains(err.Error(), "the run took 2.5") {
		t.Errorf("a changed wall time: %v", err)
	}
	// A merge never carries a part's cost: the merged run is priced again by its writer.
	var m Envelope
	if err := m.Merge(e); err != nil || m.Cost != nil {
		t.Errorf("merge: %v, cost %+v", err, m.Cost)
	}
	// No price: no cost, and nothing in the file.
	e2 := &Envelope{Format: Format, Harness: "keycast", Command: "run", StartedAt: start, EndedAt: start.Add(time.Second)}
	if err := e2.SetCost([]cost.Price{{}}, cost.Price{}, capa); err != nil || e2.Cost != nil {
		t.Fatalf("unpriced: %v, %+v", err, e2.Cost)
	}
	if b, _ := json.Marshal(e2); strings.Contains(string(b), `"cost"`) {
		t.Errorf("an unpriced envelope writes a cost: %s", b)
	}
}
