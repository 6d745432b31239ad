package cost

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// FuzzPriceJSON: a price in a plan or a machine record (a JSON number or string) is accepted only
// when it is a valid price, and then writes back to the same price.
func FuzzPriceJSON(f *testing.F) {
	for _, s := range []string{`1.53`, `"1.53USD"`, `-1`, `1e300`, `"x"`, `true`, `null`, `"0EUR"`, `0.0001`, `{"a":1}`, `"1.5 USD"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var p Price
		if err := json.Unmarshal([]byte(s), &p); err != nil || !p.Given {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%s decoded to an invalid price %+v: %v", s, p, err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back Price
		if err := json.Unmarshal(b, &back); err != nil || back != p {
			t.Fatalf("%s: %+v wrote %s, which reads back as %+v, %v", s, p, b, back, err)
		}
	})
}

// FuzzCheck: a recorded cost from a hostile file never panics the recomputation, and one that
// passes is the cost its own prices give: finite, not negative, its currency a label of letters,
// its line free of control characters.
func FuzzCheck(f *testing.F) {
	good, _ := Compute(Inputs{Seconds: 60, Load: []Price{{PerHour: 1, Currency: "USD", Given: true}}, Server: Price{PerHour: 2, Currency: "USD", Given: true},
		Capacity: Capacity{HeldConnections: 10, Requests: 1000, HandshakesPerSec: 5}})
	gb, _ := json.Marshal(good)
	f.Add(gb, 60.0, int64(10), int64(1000), 5.0)
	f.Add([]byte(`{"currency":"<b>","seconds":1,"load":{"per_hour":[1],"machine_hours":0.0002777777777777778,"cost":0.0002777777777777778},"total":0.0002777777777777778}`), 1.0, int64(0), int64(0), 0.0)
	f.Add([]byte(`{"seconds":1,"server":{"per_hour":[1,2]},"total":1}`), 1.0, int64(0), int64(0), 0.0)
	f.Add([]byte(`{"seconds":1e308,"load":{"per_hour":[1e5]},"total":1e308}`), 1e308, int64(0), int64(0), 0.0)
	f.Fuzz(func(t *testing.T, b []byte, secs float64, held, reqs int64, hs float64) {
		var c Cost
		if json.Unmarshal(b, &c) != nil {
			return
		}
		capa := Capacity{HeldConnections: held, Requests: reqs, HandshakesPerSec: hs}
		if err := Check(&c, secs, capa); err != nil {
			return
		}
		if math.IsNaN(c.Total) || math.IsInf(c.Total, 0) || c.Total < 0 {
			t.Fatalf("a cost with total %v passed", c.Total)
		}
		for _, r := range c.Currency {
			if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
				t.Fatalf("currency %q passed", c.Currency)
			}
		}
		if line := c.Line(); strings.ContainsFunc(line, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("line %q holds a control character", line)
		}
	})
}
