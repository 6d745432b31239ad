package cost

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestParsePrice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Price
		err  string
	}{
		{in: "1.53", want: Price{PerHour: 1.53, Given: true}},
		{in: "1.53USD", want: Price{PerHour: 1.53, Currency: "USD", Given: true}},
		{in: "0", want: Price{PerHour: 0, Given: true}},
		{in: "0.2credits", want: Price{PerHour: 0.2, Currency: "credits", Given: true}},
		{in: "100000", want: Price{PerHour: 100000, Given: true}},
		{in: "", err: "empty price"},
		{in: "-1", err: "plain decimal number"},
		{in: "NaN", err: "no amount"},
		{in: "Inf", err: "no amount"},
		{in: "1e3", err: "plain decimal number"},
		{in: "100000.01", err: "above 100000"},
		{in: "1.5.3", err: "not a decimal number"},
		{in: "1.53 USD", err: "plain decimal number"},
		{in: "1.53USDOLLARS", err: "longer than 8"},
		{in: "USD", err: "no amount"},
		{in: strings.Repeat("9", 400), err: "bytes long"},
	} {
		got, err := ParsePrice(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePrice(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePrice(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := ParsePrice(got.String()); err != nil || back != got {
			t.Errorf("ParsePrice(%q).String() = %q does not read back: %+v, %v", tc.in, got.String(), back, err)
		}
	}
}

func TestPriceJSON(t *testing.T) {
	var v struct {
		A Price `json:"a"`
		B Price `json:"b"`
		C Price `json:"c,omitzero"`
	}
	if err := json.Unmarshal([]byte(`{"a": 1.53, "b": "2EUR"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != (Price{PerHour: 1.53, Given: true}) || v.B != (Price{PerHour: 2, Currency: "EUR", Given: true}) {
		t.Fatalf("decoded %+v", v)
	}
	b, _ := json.Marshal(v)
	if string(b) != `{"a":"1.53","b":"2EUR"}` {
		t.Fatalf("encoded %s", b)
	}
	for _, bad := range []string{`{"a": -1}`, `{"a": 1e300}`, `{"a": "x"}`, `{"a": true}`, `{"a": "-2USD"}`} {
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("%s decoded without an error", bad)
		}
	}
}

// TestComputeByHand checks the arithmetic against figures worked out by hand: two load machines at
// 1.5 and 0.5 an hour and a server at 1.0 an hour, for half an hour.
func TestComputeByHand(t *testing.T) {
	usd := func(v float64) Price { return Price{PerHour: v, Currency: "USD", Given: true} }
	c, err := Compute(Inputs{Seconds: 1800, Load: []Price{usd(1.5), usd(0.5), {}}, Server: usd(1),
		Capacity: Capacity{HeldConnections: 20_000, Requests: 3_000_000, HandshakesPerSec: 500}})
	if err != nil {
		t.Fatal(err)
	}
	// load: 2 machines × 0.5 h = 1 machine-hour, (1.5+0.5) × 0.5 = 1.0; server: 0.5 machine-hours, 0.5.
	check := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("load machine-hours", c.Load.MachineHours, 1)
	check("load cost", c.Load.Cost, 1)
	check("server machine-hours", c.Server.MachineHours, 0.5)
	check("server cost", c.Server.Cost, 0.5)
	check("total", c.Total, 1.5)
	if c.Currency != "USD" || len(c.Units) != 3 {
		t.Fatalf("currency %q, units %+v", c.Currency, c.Units)
	}
	// 10k connections for an hour: 3.0/h × 10,000 / 20,000 = 1.5 (load 1.0, server 0.5).
	u := c.Units[0]
	check(u.Name+" total", u.Total, 1.5)
	check(u.Name+" load", u.Load, 1)
	check(u.Name+" server", u.Server, 0.5)
	// a million requests: 1.5 × 1e6 / 3e6 = 0.5 (load 1/3, server 1/6).
	u = c.Units[1]
	check(u.Name+" total", u.Total, 0.5)
	check(u.Name+" load", u.Load, 1.0/3)
	check(u.Name+" server", u.Server, 1.0/6)
	// 1,000 handshakes/s for an hour: 3.0/h × 1,000 / 500 = 6 (load 4, server 2).
	u = c.Units[2]
	check(u.Name+" total", u.Total, 6)
	check(u.Name+" load", u.Load, 4)
	check(u.Name+" server", u.Server, 2)
	if err := Check(c, 1800, Capacity{HeldConnections: 20_000, Requests: 3_000_000, HandshakesPerSec: 500}); err != nil {
		t.Errorf("Check of an honest cost: %v", err)
	}
	line := c.Line()
	for _, want := range []string{"cost: 1.5 USD for 1800 s", "load 1 USD over 1 machine-hours on 2 machines", "server 0.5 USD over 0.5 machine-hours",
		"1.5 USD per 10,000 connections held for an hour (load 1 USD, server 0.5 USD)", "0.5 USD per million requests served", "6 USD per 1,000 handshakes/s"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
}

func TestComputeNoPrice(t *testing.T) {
	c, err := Compute(Inputs{Seconds: 10, Load: []Price{{}, {}}, Capacity: Capacity{Requests: 5}})
	if c != nil || err != nil {
		t.Fatalf("no price: %+v, %v; want nil, nil", c, err)
	}
	if c.Line() != "" {
		t.Fatal("a nil cost has a line")
	}
}

func TestComputeRefuses(t *testing.T) {
	p := func(v float64, cur string) Price { return Price{PerHour: v, Currency: cur, Given: true} }
	for name, in := range map[string]Inputs{
		"two currencies": {Seconds: 1, Load: []Price{p(1, "USD")}, Server: p(1, "EUR")},
		"negative price": {Seconds: 1, Load: []Price{p(-1, "")}},
		"NaN price":      {Seconds: 1, Load: []Price{p(math.NaN(), "")}},
		"NaN time":       {Seconds: math.NaN(), Load: []Price{p(1, "")}},
		"negative time":  {Seconds: -1, Load: []Price{p(1, "")}},
	} {
		if c, err := Compute(in); err == nil {
			t.Errorf("%s: computed %+v without an error", name, c)
		}
	}
}

// TestLoadOnlyUnits: with no server price the units count the load side only, and a requests-only
// run has the one unit.
func TestLoadOnlyUnits(t *testing.T) {
	c, err := Compute(Inputs{Seconds: 36, Load: []Price{{PerHour: 2, Given: true}}, Capacity: Capacity{Requests: 400}})
	if err != nil {
		t.Fatal(err)
	}
	// 2/h × 0.01 h = 0.02; per million: 0.02 × 1e6 / 400 = 50.
	if c.Server != nil || math.Abs(c.Total-0.02) > 1e-15 || len(c.Units) != 1 || math.Abs(c.Units[0].Total-50) > 1e-9 || c.Units[0].Server != 0 {
		t.Fatalf("cost %+v units %+v", c, c.Units)
	}
}

func TestCheckRefusesTampering(t *testing.T) {
	capa := Capacity{Requests: 1000}
	fresh := func() *Cost {
		c, err := Compute(Inputs{Seconds: 60, Load: []Price{{PerHour: 1, Given: true}}, Server: Price{PerHour: 3, Given: true}, Capacity: capa})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for name, tc := range map[string]struct {
		edit func(*Cost)
		secs float64
		capa Capacity
		want string
	}{
		"total":          {edit: func(c *Cost) { c.Total /= 2 }, want: "total"},
		"load cost":      {edit: func(c *Cost) { c.Load.Cost = 0 }, want: "load cost"},
		"unit":           {edit: func(c *Cost) { c.Units[0].Total = 0.01 }, want: "per_million_requests total"},
		"units dropped":  {edit: func(c *Cost) { c.Units = nil }, want: "unit costs recorded"},
		"seconds":        {edit: func(c *Cost) {}, secs: 30, want: "the run took 30"},
		"capacity":       {edit: func(c *Cost) {}, capa: Capacity{Requests: 2000}, want: "capacity"},
		"two servers":    {edit: func(c *Cost) { c.Server.PerHour = append(c.Server.PerHour, 1) }, want: "not 1"},
		"machine-hours":  {edit: func(c *Cost) { c.Server.MachineHours = 9 }, want: "server machine-hours"},
		"cheaper server": {edit: func(c *Cost) { c.Server.PerHour[0] = 0.5 }, want: "server cost"},
	} {
		c := fresh()
		tc.edit(c)
		secs, cp := 60.0, capa
		if tc.secs != 0 {
			secs = tc.secs
		}
		if tc.capa != (Capacity{}) {
			cp = tc.capa
		}
		err := Check(c, secs, cp)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check = %v; want an error naming %q", name, err, tc.want)
		}
	}
}

func TestSum(t *testing.T) {
	a, _ := Compute(Inputs{Seconds: 3600, Load: []Price{{PerHour: 1, Given: true}}, Capacity: Capacity{Requests: 10}})
	b, _ := Compute(Inputs{Seconds: 1800, Load: []Price{{PerHour: 1, Given: true}}, Server: Price{PerHour: 2, Given: true}})
	s, err := Sum(a, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Seconds != 5400 || s.Total != 2.5 || s.Load.Cost != 1.5 || s.Load.MachineHours != 1.5 || s.Server.Cost != 1 || len(s.Units) != 0 {
		t.Fatalf("sum %+v load %+v server %+v", s, s.Load, s.Server)
	}
	if s, err := Sum(nil, nil); s != nil || err != nil {
		t.Fatalf("sum of nothing: %+v, %v", s, err)
	}
}

func FuzzParsePrice(f *testing.F) {
	for _, s := range []string{"1.53", "1.53USD", "0", "-1", "NaN", "1e9", "", "100000.0001", "1..2", "9EUR"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrice(s)
		if err != nil {
			return
		}
		if p.PerHour < 0 || p.PerHour > MaxPerHour || math.IsNaN(p.PerHour) || !p.Given {
			t.Fatalf("ParsePrice(%q) accepted %+v", s, p)
		}
		back, err := ParsePrice(p.String())
		if err != nil || back != p {
			t.Fatalf("ParsePrice(%q) = %+v does not round-trip through %q: %+v, %v", s, p, p.String(), back, err)
		}
		var j Price
		if err := json.Unmarshal([]byte(`"`+p.String()+`"`), &j); err != nil || j != p {
			t.Fatalf("JSON of %q: %+v, %v", p.String(), j, err)
		}
	})
}
