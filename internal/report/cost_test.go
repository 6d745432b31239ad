package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/result"
)

func pricedEnvelope(t *testing.T, load, server cost.Price, capa cost.Capacity) *result.Envelope {
	t.Helper()
	start := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	e := &result.Envelope{Format: result.Format, Harness: "keycast", Command: "run", StartedAt: start, EndedAt: start.Add(90 * time.Second)}
	if err := e.SetCost([]cost.Price{load}, server, capa); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestCostTileAndLine: the tile holds the run's cost and a row per side and per unit, with the
// figure the unit divides by; the text line is the cost's own; nothing for a run without a price.
func TestCostTileAndLine(t *testing.T) {
	usd := func(v float64) cost.Price { return cost.Price{PerHour: v, Currency: "USD", Given: true} }
	e := pricedEnvelope(t, usd(2), usd(1), cost.Capacity{HeldConnections: 5000, HandshakesPerSec: 250})
	v := costView(e)
	if v == nil || v.Total != cost.Money(e.Cost.Total, "USD") || v.Label != "cost of the run (90 s)" || len(v.Rows) != 4 {
		t.Fatalf("tile %+v", v)
	}
	// 3 USD an hour: 6 USD per 10,000 held connections (5,000 held), 12 USD per 1,000 handshakes/s (250).
	for i, want := range []string{"Load machines (1)", "Server machine", "Cost per 10,000 connections held for an hour", "Cost per 1,000 handshakes/s sustained for an hour"} {
		if v.Rows[i][0] != want {
			t.Errorf("row %d is %q, want %q", i, v.Rows[i][0], want)
		}
	}
	for i, want := range []string{"at 2 USD per hour", "at 1 USD per hour", "6 USD (load 4 USD, server 2 USD) — 5000 connections held", "12 USD (load 8 USD, server 4 USD) — 250 handshakes/s sustained"} {
		if !strings.Contains(v.Rows[i][1], want) {
			t.Errorf("row %d %q lacks %q", i, v.Rows[i][1], want)
		}
	}
	var b bytes.Buffer
	writeCost(&b, e)
	if b.String() != e.Cost.Line()+"\n" || !strings.HasPrefix(b.String(), "cost: ") {
		t.Errorf("line %q", b.String())
	}
	plain := pricedEnvelope(t, cost.Price{}, cost.Price{}, cost.Capacity{Requests: 10})
	b.Reset()
	writeCost(&b, plain)
	if costView(plain) != nil || b.Len() != 0 || costView(nil) != nil {
		t.Errorf("an unpriced run shows a cost: %+v %q", costView(plain), b.String())
	}
}
