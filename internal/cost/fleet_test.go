package cost

import (
	"slices"
	"strings"
	"testing"
)

// TestFleetLoadPrices: under coordinate the load side is each worker's price (the client's own
// standing for a worker that gave none) and the coordinator's; spawned workers are the
// coordinator's one machine.
func TestFleetLoadPrices(t *testing.T) {
	p := func(v float64) Price { return Price{PerHour: v, Given: true} }
	var alone *Fleet
	if got := alone.LoadPrices(p(1)); !slices.Equal(got, []Price{p(1)}) || alone.Given() {
		t.Fatalf("alone: %+v", got)
	}
	f := &Fleet{Workers: []Price{p(2), {}, p(3)}, Coordinator: p(0.5)}
	if got, want := f.LoadPrices(p(1)), []Price{p(2), p(1), p(3), p(0.5)}; !slices.Equal(got, want) {
		t.Fatalf("fleet: %+v, want %+v", got, want)
	}
	f = &Fleet{Workers: []Price{{}, {}}, Local: true, Coordinator: p(4)}
	if got := f.LoadPrices(Price{}); !f.Given() || !slices.Equal(got, []Price{p(4)}) {
		t.Fatalf("spawned: %+v", got)
	}
	f = &Fleet{Workers: []Price{{}, {}}, Local: true}
	if got := f.LoadPrices(p(1)); !slices.Equal(got, []Price{p(1)}) {
		t.Fatalf("spawned, the coordinator unpriced: %+v", got)
	}
	if f := (&Fleet{Workers: []Price{{}, {}}}); f.Given() {
		t.Fatal("a fleet without a price is priced")
	}
	f = &Fleet{Workers: []Price{{PerHour: 1, Currency: "USD", Given: true}}}
	if _, err := Currency(append(f.LoadPrices(Price{}), Price{PerHour: 1, Currency: "EUR", Given: true})...); err == nil || !strings.Contains(err.Error(), "cannot add up") {
		t.Fatalf("two currencies across the fleet: %v", err)
	}
}
