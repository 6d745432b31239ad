package admit

import (
	"crypto/sha256"
	"net/netip"
	"strings"
	"testing"
)

func TestCanonicalSource(t *testing.T) {
	tests := []struct {
		ip     string
		prefix int
		want   string
	}{
		{"127.0.0.1", 64, "v4:127.0.0.1"},
		{"203.0.113.9", 1, "v4:203.0.113.9"}, // IPv4 is always /32
		{"::ffff:192.0.2.1", 64, "v4:192.0.2.1"},
		{"2001:db8:1234:5678:9abc:def0:1234:5678", 64, "v6:2001:db8:1234:5678::/64"},
		{"2001:db8:1234:5678:9abc:def0:1234:5678", 128, "v6:2001:db8:1234:5678:9abc:def0:1234:5678/128"},
		{"2001:db8:1234:5678:9abc:def0:1234:5678", 48, "v6:2001:db8:1234::/48"},
		{"2001:DB8::1", 127, "v6:2001:db8::/127"},
		{"::1", 64, "v6:::/64"},
		{"::1", 128, "v6:::1/128"},
		{"fe80::1%eth0", 128, "v6:fe80::1/128"},
		{"2001:db8:0:1:1:1:1:1", 128, "v6:2001:db8:0:1:1:1:1:1/128"}, // one zero field is not compressed
		{"1:0:0:2:0:0:3:4", 128, "v6:1::2:0:0:3:4/128"},              // a tie compresses the first run
		{"1:0:0:2:0:0:0:3", 128, "v6:1:0:0:2::3/128"},                // the longest run wins
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 128, "v6:ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"},
		{"2001:db8::1", 0, "v6:::/0"},
		{"2001:db8::1", 300, "v6:2001:db8::1/128"},
		{"2001:db8::1", -3, "v6:::/0"},
	}
	for _, tt := range tests {
		ip := netip.MustParseAddr(tt.ip)
		if got := CanonicalSource(ip, tt.prefix); got != tt.want {
			t.Errorf("CanonicalSource(%s, %d) = %q, want %q", tt.ip, tt.prefix, got, tt.want)
		}
		if got, want := KeyForAddr(ip, tt.prefix), SourceKey(sha256.Sum256([]byte(tt.want))); got != want {
			t.Errorf("KeyForAddr(%s, %d) is not sha256(%q)", tt.ip, tt.prefix, tt.want)
		}
	}
	if got := CanonicalSource(netip.Addr{}, 64); got != "raw:invalid IP" {
		t.Errorf("zero Addr = %q", got)
	}
	if KeyForAddr(netip.Addr{}, 64) != KeyForString("invalid IP", 64) {
		t.Error("zero Addr does not share the raw bucket of its text")
	}
}

func TestKeyForString(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical string hashed
	}{
		{"127.0.0.1", "v4:127.0.0.1"},
		{"2001:db8::1", "v6:2001:db8::/64"},
		{"::ffff:10.0.0.1", "v4:10.0.0.1"},
		{"fe80::1%eth0", "raw:fe80::1%eth0"}, // zones do not parse upstream
		{"127.0.0.1:443", "raw:127.0.0.1:443"},
		{"010.0.0.1", "raw:010.0.0.1"},
		{"", "raw:"},
		{" 127.0.0.1", "raw: 127.0.0.1"},
		{"unknown-tcp-peer", "raw:unknown-tcp-peer"},
	}
	for _, tt := range tests {
		if got, want := KeyForString(tt.in, 64), SourceKey(sha256.Sum256([]byte(tt.want))); got != want {
			t.Errorf("KeyForString(%q) is not sha256(%q)", tt.in, tt.want)
		}
	}
}

func TestSourceKeyString(t *testing.T) {
	k := KeyForAddr(netip.MustParseAddr("127.0.0.1"), 64)
	if s := k.String(); len(s) != 64 || strings.ToLower(s) != s {
		t.Fatalf("String() = %q", s)
	}
}

func FuzzKeyForString(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::1", "::ffff:1.2.3.4", "fe80::1%eth0", "2001:db8::", "", "raw:x",
		"1.2.3.4.5", "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", "::ffff:0:0", "unknown-tcp-peer"} {
		for _, p := range []int{1, 48, 64, 128} {
			f.Add(s, p)
		}
	}
	f.Fuzz(func(t *testing.T, s string, prefix int) {
		got := KeyForString(s, prefix)
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			if want := SourceKey(sha256.Sum256([]byte("raw:" + s))); got != want {
				t.Fatalf("unparseable %q is not hashed raw", s)
			}
			return
		}
		if got != KeyForAddr(ip, prefix) {
			t.Fatalf("KeyForString(%q) != KeyForAddr", s)
		}
		c := CanonicalSource(ip, prefix)
		if len(c) > maxCanonicalLen {
			t.Fatalf("canonical %q is longer than %d", c, maxCanonicalLen)
		}
		if !strings.HasPrefix(c, "v4:") && !strings.HasPrefix(c, "v6:") {
			t.Fatalf("canonical %q has no family prefix", c)
		}
		if ip.Is4() || ip.Is4In6() {
			if KeyForAddr(ip.Unmap(), prefix) != got {
				t.Fatalf("%q and its unmapped form differ", s)
			}
		} else if p := min(max(prefix, 0), 128); true {
			masked, _ := ip.Prefix(p)
			if KeyForAddr(masked.Addr(), prefix) != got {
				t.Fatalf("%q and its /%d network differ", s, p)
			}
		}
	})
}
