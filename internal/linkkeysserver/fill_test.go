package linkkeysserver

import (
	"strconv"
	"strings"
	"testing"
)

func TestFillMarks(t *testing.T) {
	for _, c := range []struct {
		quota     uint64
		backlog   int
		high, low int64
	}{
		{18333, 1024, 18333 - 366 - 2048, 18333 - 366 - 2048 - 366}, // the 200,000 ramp's children
		{100000, 4096, 100000 - 1024 - 8192, 100000 - 1024 - 8192 - 1024},
		{10, 1024, 10 - 1 - 2, 10 - 1 - 2 - 1}, // the queue's share is at most a quarter of the cap
		{1, 0, 1, 0},
		{0, 1024, 1, 0},
	} {
		high, low := fillMarks(c.quota, c.backlog)
		if high != c.high || low != c.low {
			t.Errorf("fillMarks(%d, %d) = %d, %d; want %d, %d", c.quota, c.backlog, high, low, c.high, c.low)
		}
	}
}

func TestOccupancyTurns(t *testing.T) {
	o := NewOccupancy(10, 8)
	turns := 0
	step := func(open int64, full bool) {
		t.Helper()
		o.note(open)
		select {
		case <-o.Changed():
			turns++
		default:
		}
		if o.Full() != full {
			t.Fatalf("at %d open: full %v, want %v", open, o.Full(), full)
		}
	}
	for n := int64(1); n < 10; n++ {
		step(n, false)
	}
	step(10, true)
	step(11, true)
	step(9, true) // between the marks: no flip
	step(10, true)
	step(8, false)
	step(9, false)
	step(10, true)
	if turns != 3 {
		t.Fatalf("%d turns signalled, want 3", turns)
	}
}

// FuzzParseFill: a --process-fill value is one of the three words, and anything else is refused
// with a message that names it and the accepted words.
func FuzzParseFill(f *testing.F) {
	for _, s := range []string{"auto", "spread", "sequential", "", "Sequential", "seq", "spread ", "Auto"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fill, err := ParseFill(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) || !strings.Contains(err.Error(), "spread") || !strings.Contains(err.Error(), "sequential") || !strings.Contains(err.Error(), "auto") {
				t.Fatalf("error for %q does not name it and the accepted values: %v", s, err)
			}
			return
		}
		if fill.String() != s {
			t.Fatalf("ParseFill(%q) = %v", s, fill)
		}
	})
}

func TestSequentialFillProblem(t *testing.T) {
	cfg := Config{MaxConnections: 220000} // the 200,000 ramp: 18,333 a process for 12
	if p := SequentialFillProblem(cfg, 12); p != "" {
		t.Errorf("200,000 ramp: %s", p)
	}
	cfg.MaxConnections = 16500 // the 15,000 ramp that shed: 1,375 a process
	if p := SequentialFillProblem(cfg, 12); !strings.Contains(p, "1375") || !strings.Contains(p, "listen backlog 1024") {
		t.Errorf("15,000 ramp: %q", p)
	}
	if p := SequentialFillProblem(cfg, 1); p != "" {
		t.Errorf("one process: %s", p)
	}
}

// TestChooseFill: auto is sequential when the shares leave room for the listen queues, spread when
// they do not (with the reason) and for one process; an explicit choice stands as given.
func TestChooseFill(t *testing.T) {
	big, small := Config{MaxConnections: 220000}, Config{MaxConnections: 16500}
	for _, c := range []struct {
		fill Fill
		cfg  Config
		n    int
		want Fill
		why  string
	}{
		{FillAuto, big, 12, FillSequential, "room"},
		{FillAuto, small, 12, FillSpread, "1375"},
		{FillAuto, big, 1, FillSpread, "one process"},
		{FillSequential, small, 12, FillSequential, ""},
		{FillSpread, big, 12, FillSpread, ""},
	} {
		got, why := ChooseFill(c.fill, c.cfg, c.n)
		if got != c.want || (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
			t.Errorf("ChooseFill(%v, %d max, %d) = %v, %q; want %v, %q", c.fill, c.cfg.MaxConnections, c.n, got, why, c.want, c.why)
		}
	}
}

// TestOccupancyExhausted: an accept that fails for want of a descriptor below
// the high mark brings the marks down to the open count (keeping their gap)
// and turns the watch full; it turns back once connections fall to the new
// low mark. At or above the high mark nothing moves.
func TestOccupancyExhausted(t *testing.T) {
	o := NewOccupancy(100, 90)
	o.note(40)
	o.exhausted(40)
	if !o.Full() {
		t.Fatal("not full after running out of descriptors at 40 open")
	}
	if h, l := o.Marks(); h != 40 || l != 30 {
		t.Fatalf("marks %d, %d; want 40, 30", h, l)
	}
	o.note(31)
	if !o.Full() {
		t.Fatal("turned back above the new low mark")
	}
	o.note(30)
	if o.Full() {
		t.Fatal("still full at the new low mark")
	}
	o.exhausted(50) // above the high mark: full, the marks stay
	if h, l := o.Marks(); !o.Full() || h != 40 || l != 30 {
		t.Fatalf("after exhaustion above the mark: full %v, marks %d, %d", o.Full(), h, l)
	}
	z := NewOccupancy(10, 8)
	z.exhausted(0) // no connection open: nothing to hand on from
	if h, _ := z.Marks(); z.Full() || h != 10 {
		t.Fatalf("with nothing open: full %v, high %d", z.Full(), h)
	}
}
