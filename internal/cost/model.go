package cost

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Units of proven capacity (Unit.Name).
const (
	// UnitHeld10k is the cost of holding 10,000 connections for an hour: the machines' price per
	// hour over the held connections, times 10,000.
	UnitHeld10k = "per_10k_connections_hour"
	// UnitMillionRequests is the cost of a million requests served: the run's cost over its
	// successful requests (never refusals or failures), times 1,000,000.
	UnitMillionRequests = "per_million_requests"
	// Unit1kHandshakesPerSec is the cost of sustaining 1,000 handshakes a second for an hour: the
	// machines' price per hour over the sustained rate, times 1,000.
	Unit1kHandshakesPerSec = "per_1k_handshakes_per_sec_hour"
)

// Capacity is what a run proved: the figures the unit costs divide by. Zero means "not measured
// by this run" and gives no unit.
type Capacity struct {
	// HeldConnections are the connections established and held at once.
	HeldConnections int64
	// Requests are the requests served successfully (refusals and failures excluded).
	Requests int64
	// HandshakesPerSec is the handshake rate sustained over the run.
	HandshakesPerSec float64
}

// Inputs are what a run's cost is computed from.
type Inputs struct {
	// Seconds is the run's wall time, the same for every machine (they start at one instant).
	Seconds float64
	// Load holds one price per load machine (each worker, the coordinator, a lone client); prices
	// not given are skipped.
	Load []Price
	// Server is the price of the server's machine; not given: the server side is not priced.
	Server Price
	// Capacity is what the run proved.
	Capacity Capacity
}

// Cost is a run's cost as its result file, evidence and report record it.
type Cost struct {
	// Currency is the prices' one label, empty when none was given.
	Currency string `json:"currency,omitempty"`
	// Seconds is the wall time priced.
	Seconds float64 `json:"seconds"`
	// Load is the load machines' side; Server the server machine's; either is absent when not priced.
	Load   *Side `json:"load,omitempty"`
	Server *Side `json:"server,omitempty"`
	// Total is the run's cost, both sides together.
	Total float64 `json:"total"`
	// Units are the costs of the capacity the run proved (absent for a capacity it did not measure).
	Units []Unit `json:"units,omitempty"`
}

// Side is one side's machines: their prices per hour, machine-hours and cost.
type Side struct {
	// PerHour holds each machine's price per hour.
	PerHour      []float64 `json:"per_hour"`
	MachineHours float64   `json:"machine_hours"`
	Cost         float64   `json:"cost"`
}

// Unit is the cost of one unit of proven capacity, by side.
type Unit struct {
	Name string `json:"unit"`
	// Capacity is the figure divided by (held connections, requests, handshakes per second).
	Capacity float64 `json:"capacity"`
	Load     float64 `json:"load,omitempty"`
	Server   float64 `json:"server,omitempty"`
	Total    float64 `json:"total"`
}

// Compute prices a run. It returns nil (no cost) when no price was given, and an error when a price
// is invalid, prices carry different currencies or the wall time is not a finite number ≥ 0.
func Compute(in Inputs) (*Cost, error) {
	var load []float64
	all := append([]Price{in.Server}, in.Load...)
	for _, p := range all {
		if p.Given {
			if err := p.Validate(); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range in.Load {
		if p.Given {
			load = append(load, p.PerHour)
		}
	}
	if len(load) == 0 && !in.Server.Given {
		return nil, nil
	}
	if math.IsNaN(in.Seconds) || math.IsInf(in.Seconds, 0) || in.Seconds < 0 {
		return nil, fmt.Errorf("cost: run time %v s is not a finite number of seconds ≥ 0", in.Seconds)
	}
	cur, err := Currency(all...)
	if err != nil {
		return nil, err
	}
	c := &Cost{Currency: cur, Seconds: in.Seconds}
	if len(load) > 0 {
		c.Load = side(load, in.Seconds)
	}
	if in.Server.Given {
		c.Server = side([]float64{in.Server.PerHour}, in.Seconds)
	}
	c.Total = c.Load.cost() + c.Server.cost()
	c.Units = units(c, in.Capacity)
	return c, nil
}

func side(perHour []float64, secs float64) *Side {
	h := secs / 3600
	return &Side{PerHour: perHour, MachineHours: float64(len(perHour)) * h, Cost: sum(perHour) * h}
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

func (s *Side) cost() float64 {
	if s == nil {
		return 0
	}
	return s.Cost
}

func (s *Side) rate() float64 {
	if s == nil {
		return 0
	}
	return sum(s.PerHour)
}

// PerHour is the price of all priced machines for one hour.
func (c *Cost) PerHour() float64 { return c.Load.rate() + c.Server.rate() }

func units(c *Cost, capa Capacity) []Unit {
	var out []Unit
	perHour := func(name string, capacity, per float64) {
		if capacity > 0 {
			k := per / capacity
			out = append(out, Unit{Name: name, Capacity: capacity, Load: c.Load.rate() * k, Server: c.Server.rate() * k, Total: c.PerHour() * k})
		}
	}
	perHour(UnitHeld10k, float64(capa.HeldConnections), 10_000)
	if capa.Requests > 0 {
		k := 1e6 / float64(capa.Requests)
		out = append(out, Unit{Name: UnitMillionRequests, Capacity: float64(capa.Requests), Load: c.Load.cost() * k, Server: c.Server.cost() * k, Total: c.Total * k})
	}
	if !math.IsNaN(capa.HandshakesPerSec) && !math.IsInf(capa.HandshakesPerSec, 0) {
		perHour(Unit1kHandshakesPerSec, capa.HandshakesPerSec, 1_000)
	}
	return out
}

// Inputs returns the inputs c was computed from, with capa as its capacity: recomputing them must
// give c again (Check).
func (c *Cost) Inputs(capa Capacity) Inputs {
	in := Inputs{Seconds: c.Seconds, Capacity: capa}
	if c.Load != nil {
		for _, v := range c.Load.PerHour {
			in.Load = append(in.Load, Price{PerHour: v, Currency: c.Currency, Given: true})
		}
	}
	if c.Server != nil && len(c.Server.PerHour) == 1 {
		in.Server = Price{PerHour: c.Server.PerHour[0], Currency: c.Currency, Given: true}
	}
	return in
}

// Check recomputes a recorded cost from its own prices, the wall time secs and the capacity capa
// (figures read from the run's results, never from the cost itself) and says what disagrees: a
// tampered or stale cost. A server side of more than one machine is refused.
func Check(c *Cost, secs float64, capa Capacity) error {
	if c == nil {
		return nil
	}
	if c.Server != nil && len(c.Server.PerHour) != 1 {
		return fmt.Errorf("cost: the server side lists %d machine prices, not 1", len(c.Server.PerHour))
	}
	if !near(c.Seconds, secs) {
		return fmt.Errorf("cost: priced %s s, but the run took %s s", num(c.Seconds), num(secs))
	}
	want, err := Compute(c.Inputs(capa))
	if err != nil {
		return err
	}
	if want == nil {
		return errors.New("cost: a cost is recorded without a single machine price")
	}
	var bad []string
	cmp := func(what string, got, w float64) {
		if !near(got, w) {
			bad = append(bad, fmt.Sprintf("%s is %s, recomputed %s", what, num(got), num(w)))
		}
	}
	cmp("total", c.Total, want.Total)
	if (c.Load == nil) != (want.Load == nil) {
		return errors.New("cost: the recorded load side lists no machine price: a load side needs one price per machine")
	}
	if (c.Server == nil) != (want.Server == nil) {
		return errors.New("cost: the recorded server side lists no machine price: a server side needs its machine's price")
	}
	if c.Load != nil {
		cmp("load cost", c.Load.Cost, want.Load.Cost)
		cmp("load machine-hours", c.Load.MachineHours, want.Load.MachineHours)
	}
	if c.Server != nil {
		cmp("server cost", c.Server.Cost, want.Server.Cost)
		cmp("server machine-hours", c.Server.MachineHours, want.Server.MachineHours)
	}
	if len(c.Units) != len(want.Units) {
		bad = append(bad, fmt.Sprintf("%d unit costs recorded, %d recomputed", len(c.Units), len(want.Units)))
	} else {
		for i, u := range c.Units {
			w := want.Units[i]
			if u.Name != w.Name {
				bad = append(bad, fmt.Sprintf("unit %d is %s, recomputed %s", i, u.Name, w.Name))
				continue
			}
			cmp(u.Name+" capacity", u.Capacity, w.Capacity)
			cmp(u.Name+" load", u.Load, w.Load)
			cmp(u.Name+" server", u.Server, w.Server)
			cmp(u.Name+" total", u.Total, w.Total)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("cost: the recorded cost disagrees with its recomputation: %s", strings.Join(bad, "; "))
	}
	return nil
}

// near compares two recorded figures allowing for JSON's round trip and summation order.
func near(a, b float64) bool {
	if a == b {
		return true
	}
	d := math.Abs(a - b)
	return d <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) || d < 1e-12
}

// Sum adds the costs of a run's parts (a capacity run's phases): wall time, machine-hours and cost
// add; unit costs do not (each part proved its own capacity), so the sum has none. Nil parts are
// skipped; all nil gives nil.
func Sum(parts ...*Cost) (*Cost, error) {
	var out *Cost
	for _, p := range parts {
		if p == nil {
			continue
		}
		if out == nil {
			out = &Cost{Currency: p.Currency}
		} else if p.Currency != "" && out.Currency != "" && !strings.EqualFold(p.Currency, out.Currency) {
			return nil, fmt.Errorf("cost: parts priced in %s and %s cannot add up", out.Currency, p.Currency)
		}
		out.Currency = cmpOr(out.Currency, p.Currency)
		out.Seconds += p.Seconds
		out.Load = addSide(out.Load, p.Load)
		out.Server = addSide(out.Server, p.Server)
		out.Total += p.Total
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func addSide(a, b *Side) *Side {
	if b == nil {
		return a
	}
	if a == nil {
		return &Side{PerHour: append([]float64(nil), b.PerHour...), MachineHours: b.MachineHours, Cost: b.Cost}
	}
	if len(b.PerHour) > len(a.PerHour) {
		a.PerHour = append([]float64(nil), b.PerHour...)
	}
	a.MachineHours += b.MachineHours
	a.Cost += b.Cost
	return a
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }

// Line is the one text line that says what a run cost: "cost: 0.0425USD (load 0.0255, server
// 0.017; 0.1 machine-hours); 1.53USD per million requests (load …, server …)".
func (c *Cost) Line() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cost: %s for %s s", Money(c.Total, c.Currency), num(c.Seconds))
	var sides []string
	if c.Load != nil {
		machines := "1 machine"
		if n := len(c.Load.PerHour); n != 1 {
			machines = fmt.Sprintf("%d machines", n)
		}
		sides = append(sides, fmt.Sprintf("load %s over %s machine-hours on %s", Money(c.Load.Cost, c.Currency), num(c.Load.MachineHours), machines))
	}
	if c.Server != nil {
		sides = append(sides, fmt.Sprintf("server %s over %s machine-hours", Money(c.Server.Cost, c.Currency), num(c.Server.MachineHours)))
	}
	fmt.Fprintf(&b, " (%s)", strings.Join(sides, ", "))
	for _, u := range c.Units {
		fmt.Fprintf(&b, "; %s %s", Money(u.Total, c.Currency), UnitLabel(u.Name))
		if c.Load != nil && c.Server != nil {
			fmt.Fprintf(&b, " (load %s, server %s)", Money(u.Load, c.Currency), Money(u.Server, c.Currency))
		}
	}
	return b.String()
}

// UnitLabel is a unit's name in words.
func UnitLabel(name string) string {
	switch name {
	case UnitHeld10k:
		return "per 10,000 connections held for an hour"
	case UnitMillionRequests:
		return "per million requests served"
	case Unit1kHandshakesPerSec:
		return "per 1,000 handshakes/s sustained for an hour"
	}
	return name
}

// Money writes an amount with 4 significant digits and the currency label.
func Money(v float64, cur string) string {
	s := strconv.FormatFloat(v, 'g', 4, 64)
	if math.Abs(v) >= 1000 || strings.Contains(s, "e") {
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	if s == "0.00" && v != 0 {
		s = strconv.FormatFloat(v, 'g', 4, 64)
	}
	if cur == "" {
		return s
	}
	return s + " " + cur
}
