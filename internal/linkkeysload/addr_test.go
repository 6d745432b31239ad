package linkkeysload

import (
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

func TestNthLoopbackAddr(t *testing.T) {
	cases := []struct {
		base string
		n    uint32
		want string
	}{
		{"127.0.1.0", 0, "127.0.1.0"},
		{"127.0.1.0", 31, "127.0.1.31"},
		{"127.0.1.0", 256, "127.0.2.0"},
		{"127.5.0.0", 11999, "127.5.46.223"},
		{"127.255.255.255", 1, "127.0.0.0"},      // wraps inside 127/8
		{"127.255.255.250", 10, "127.0.0.4"},     // wraps past the top
		{"10.0.0.1", 0, "10.0.0.1"},              // first octet kept (the seed forced 127)
		{"198.18.255.255", 2, "198.19.0.1"},      // a routed prefix crossing a /16
		{"198.255.255.255", 1, "198.0.0.0"},      // wraps inside the base's /8
		{"127.0.0.0", 1 << 24, "127.0.0.0"},      // a full turn of the 24 bits
		{"127.0.0.5", 0xFFFFFFFF, "127.0.0.4"},   // u32 wrapping add
		{"255.255.255.255", 1, "255.0.0.0"},      // no overflow into the first octet
		{"127.0.5.0", 1_000_000, "127.15.71.64"}, // the 1,000,000-source run's last-but-one
	}
	for _, c := range cases {
		base, err := ParseIPv4("--client-ip-base", c.base)
		if err != nil {
			t.Fatal(err)
		}
		if got := NthLoopbackAddr(base, c.n).String(); got != c.want {
			t.Errorf("NthLoopbackAddr(%s, %d) = %s, want %s", c.base, c.n, got, c.want)
		}
	}
}

func TestSourceAddrsRoundRobin(t *testing.T) {
	base, _ := ParseIPv4("x", "127.0.1.0")
	s := SourceAddrs{Base: base, Count: 32}
	if s.For(0) != s.For(32) || s.For(5).String() != "127.0.1.5" || s.For(37).String() != "127.0.1.5" {
		t.Fatalf("round robin: %s %s %s", s.For(0), s.For(32), s.For(37))
	}
	// Values below 1 count as 1: every attempt uses the base.
	z := SourceAddrs{Base: base, Count: 0}
	if z.For(0) != base || z.For(12345) != base {
		t.Fatal("count 0 must behave as 1")
	}
}

func TestParseIPv4(t *testing.T) {
	good := map[string]string{"127.0.1.0": "127.0.1.0", "0.0.0.0": "0.0.0.0", "255.255.255.255": "255.255.255.255", "1.2.3.4": "1.2.3.4"}
	for in, want := range good {
		a, err := ParseIPv4("--client-ip-base", in)
		if err != nil || a.String() != want {
			t.Errorf("ParseIPv4(%q) = %v, %v", in, a, err)
		}
	}
	bad := []string{"", "127.0.0", "127.0.0.1.2", "127.0.0.256", "127.00.0.1", "01.0.0.1", "127.0.0.1 ", " 127.0.0.1",
		"::1", "127.0.0.a", "127..0.1", "1234.0.0.1", "127.0.0.-1", "localhost", "127.0.0.1/8", "+1.2.3.4"}
	for _, in := range bad {
		_, err := ParseIPv4("--client-ip-base", in)
		if err == nil {
			t.Errorf("ParseIPv4(%q) accepted", in)
			continue
		}
		want := "invalid --client-ip-base " + linkkeysresult.RustDebugString(in) + ": invalid IPv4 address syntax"
		if err.Error() != want {
			t.Errorf("ParseIPv4(%q) error %q, want %q", in, err, want)
		}
	}
}

func FuzzParseIPv4(f *testing.F) {
	for _, s := range []string{"127.0.1.0", "255.255.255.255", "1.2.3", "01.2.3.4", "::1", "", "9.9.9.999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseIPv4("--client-ip-base", s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid --client-ip-base ") {
				t.Fatalf("error text %q", err)
			}
			return
		}
		// Whatever parses prints back to the same text (the syntax is canonical).
		if a.String() != s {
			t.Fatalf("%q parsed to %s", s, a)
		}
	})
}

// TestSourceAddrsInSegments: the segments of a split run own disjoint source addresses that
// together are the run's; with fewer addresses than segments every segment shares them all.
func TestSourceAddrsInSegments(t *testing.T) {
	s := SourceAddrs{Base: NthLoopbackAddr(0x7f000100, 0), Count: 10}
	seen := map[IPv4]int{}
	for _, seg := range engine.Split(4) {
		part := s.In(seg)
		for i := int64(0); i < 25; i++ {
			seen[part.For(i)] = seg.Index + 1
		}
		for i := uint32(0); i < part.Count; i++ {
			if got := seen[NthLoopbackAddr(part.Base, i)]; got != seg.Index+1 {
				t.Fatalf("segment %d's address %d is used by segment %d", seg.Index, i, got-1)
			}
		}
	}
	if len(seen) != 10 {
		t.Errorf("the segments used %d addresses; want all 10", len(seen))
	}
	if got := s.In(engine.Whole); got != s {
		t.Errorf("whole run: %+v", got)
	}
	few := SourceAddrs{Base: s.Base, Count: 2}
	if got := few.In(engine.Segment{Index: 3, Count: 4}); got != few {
		t.Errorf("fewer addresses than segments: %+v; want all shared", got)
	}
}
