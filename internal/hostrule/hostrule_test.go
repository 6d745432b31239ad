package hostrule

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonicalHost(t *testing.T) {
	cases := []struct {
		host      string
		bracketed bool
		want      string
		bad       bool
	}{
		{"LocalHost", false, "localhost", false},
		{"127.1", false, "127.0.0.1", false},
		{"0177.0.0.01", false, "127.0.0.1", false},
		{"0x7F000001", false, "127.0.0.1", false},
		{"127.0.0.1.", false, "127.0.0.1", false},
		{"1.2.3.4.5", false, "", true},
		{"256.0.0.1", false, "", true},
		{"1.2.65536", false, "", true},
		{"1.2.65535", false, "1.2.255.255", false},
		{"08.0.0.1", false, "", true},
		{"example.123", false, "", true},
		{"123.example", false, "123.example", false},
		{"::1", true, "[::1]", false},
		{"::ffff:1.2.3.4", true, "[::ffff:1.2.3.4]", false},
		{"1.2.3.4", true, "", true},
		{"fe80::1%eth0", true, "", true},
		{"", false, "", true},
		{"a b", false, "", true},
	}
	for _, c := range cases {
		got, err := CanonicalHost(c.host, c.bracketed)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("CanonicalHost(%q, %v) = %q, %v; want %q (bad %v)", c.host, c.bracketed, got, err, c.want, c.bad)
		}
	}
	if _, err := CanonicalHostFlag("example.com:443"); err == nil {
		t.Error("CanonicalHostFlag accepted a port")
	}
}

func TestRules(t *testing.T) {
	r := Rules{AllowHost: "keycast.staging.test"}
	for url, ok := range map[string]bool{
		"http://127.0.0.1:3000": true, "http://localhost:1": true, "http://[::1]:2": true,
		"https://keycast.staging.test": true, "https://KEYCAST.staging.test.": false, "https://other.test": false,
		"https://keycast.divine.video": false, "https://login.divine.video.": false, "not a url": false,
		// Upstream's URL rule: only 127.0.0.1 of the loopback block is local for a URL.
		"http://127.0.0.2:3000": false,
	} {
		if err := r.AuthorizeURL(url); (err == nil) != ok {
			t.Errorf("AuthorizeURL(%q) = %v; want ok %v", url, err, ok)
		} else if err != nil && !errors.Is(err, ErrNotAllowed) {
			t.Errorf("AuthorizeURL(%q) = %v; want ErrNotAllowed", url, err)
		}
	}
}

func TestAuthorizeAddr(t *testing.T) {
	cases := []struct {
		addr, allow string
		refuse      []string
		ok          bool
		msg         string
	}{
		{addr: "127.0.0.1:4433", ok: true},
		{addr: "127.9.8.7:4433", ok: true},
		{addr: "[::1]:4433", ok: true},
		{addr: "localhost:4433", ok: true},
		{addr: "0x7f.1:4433", ok: true},
		{addr: "198.18.0.1:4433", msg: "needs the exact --allow-host 198.18.0.1"},
		{addr: "198.18.0.1:4433", allow: "198.18.0.1", ok: true},
		{addr: "198.18.0.1", allow: "198.18.0.1", ok: true},
		{addr: "198.18.0.1:4433", allow: "198.18.0.2", msg: "needs the exact --allow-host 198.18.0.1"},
		{addr: "[fd00::1]:4433", allow: "fd00:0::1", ok: true},
		{addr: "lk.staging.test:4433", allow: "LK.Staging.Test", ok: true},
		{addr: "198.18.0.1:4433", allow: "198.18.0.1", refuse: []string{"198.18.0.1"}, msg: "refused production host"},
		{addr: "keycast.divine.video:443", allow: "keycast.divine.video", msg: "refused production host"},
		{addr: "a b:1", msg: "forbidden character"},
	}
	for _, c := range cases {
		err := Rules{AllowHost: c.allow, RefuseHosts: c.refuse}.AuthorizeAddr(c.addr)
		if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), c.msg) {
			t.Errorf("AuthorizeAddr(%q, allow %q) = %v; want ok %v, message containing %q", c.addr, c.allow, err, c.ok, c.msg)
		}
	}
}

// FuzzCanonicalHostFlag: a host flag or target from outside either normalises to a form that is
// its own fixed point, or is refused with an error; no input panics.
func FuzzCanonicalHostFlag(f *testing.F) {
	for _, s := range []string{"localhost", "127.1", "0x7f.0.0.1", "[::1]", "fd00::1", "Example.COM.", "1.2.3.4.5", "bücher", "a b", "", "[", "]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := CanonicalHostFlag(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		again, err := CanonicalHostFlag(c)
		if err != nil || again != c {
			t.Fatalf("CanonicalHostFlag(%q) = %q, but again = %q, %v", s, c, again, err)
		}
		_ = Rules{AllowHost: s}.AuthorizeAddr(c)
	})
}
