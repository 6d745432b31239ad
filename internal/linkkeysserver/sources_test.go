package linkkeysserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/envvar"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

func TestParseSourcePrefixes(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		raw  string
		want []SourcePrefix
		text string
	}{
		{"held=127.1.0.0/16", []SourcePrefix{{"held", a("127.1.0.0"), a("127.1.255.255")}}, "held=127.1.0.0/16"},
		{" a = 127.1.2.3/24 , , b=127.2.0.1-127.2.4.176,c=127.3.0.9 ", []SourcePrefix{
			{"a", a("127.1.2.0"), a("127.1.2.255")}, {"b", a("127.2.0.1"), a("127.2.4.176")}, {"c", a("127.3.0.9"), a("127.3.0.9")}},
			"a=127.1.2.0/24,b=127.2.0.1-127.2.4.176,c=127.3.0.9/32"},
		{"ddos-1=127.6.0.0-127.6.3.255,x_y=::ffff:127.7.0.0/112,v6=fd00::/64", []SourcePrefix{
			{"ddos-1", a("127.6.0.0"), a("127.6.3.255")}, {"x_y", a("127.7.0.0"), a("127.7.255.255")},
			{"v6", a("fd00::"), a("fd00::ffff:ffff:ffff:ffff")}},
			"ddos-1=127.6.0.0/22,x_y=127.7.0.0/16,v6=fd00::/64"},
		{"all=0.0.0.0/0", []SourcePrefix{{"all", a("0.0.0.0"), a("255.255.255.255")}}, "all=0.0.0.0/0"},
		{"  ", nil, ""},
	} {
		got, problems := ParseSourcePrefixes(tc.raw)
		if len(problems) > 0 || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.raw, got, problems, tc.want)
			continue
		}
		if s := FormatSourcePrefixes(got); s != tc.text {
			t.Errorf("%q formats as %q, want %q", tc.raw, s, tc.text)
		}
		if back, problems := ParseSourcePrefixes(FormatSourcePrefixes(got)); len(problems) > 0 || !reflect.DeepEqual(back, got) {
			t.Errorf("%q: round trip %v %v", tc.raw, back, problems)
		}
	}
	p := SourcePrefix{"r", a("127.0.0.2"), a("127.0.0.5")}
	for addr, in := range map[string]bool{"127.0.0.1": false, "127.0.0.2": true, "127.0.0.5": true, "127.0.0.6": false, "::ffff:127.0.0.3": true, "::1": false} {
		if p.Contains(a(addr)) != in {
			t.Errorf("%s contains %s: %v", p, addr, !in)
		}
	}
}

// TCP_SOURCE_PREFIXES is read with the other variables: every problem is reported at once, each
// naming the variable, its value and what is accepted, and a bad value refuses the start.
func TestSourcePrefixesEnvErrors(t *testing.T) {
	raw := "held=127.1.0.0/16,bad name=127.2.0.0/16,x,y=127.3.0.0/33,z=127.9.0.5-127.9.0.1,m=127.0.0.1-::1,held=127.4.0.0/16," +
		"o=127.1.2.0/24,w=nowhere"
	_, err := ConfigFromEnv(envMap(map[string]string{SourcePrefixesVar: raw, "TCP_HANDSHAKE_BURST": "0"}))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`TCP_HANDSHAKE_BURST="0"`,
		`TCP_SOURCE_PREFIXES="` + raw + `": entry "x" has no '='`,
		`entry "y=127.3.0.0/33": "127.3.0.0/33" is not a CIDR`,
		`entry "z=127.9.0.5-127.9.0.1": range "127.9.0.5-127.9.0.1" ends before it starts`,
		`entry "m=127.0.0.1-::1": range "127.0.0.1-::1" mixes IPv4 and IPv6`,
		`entry "w=nowhere": "nowhere" is not an IP address, CIDR or range FIRST-LAST`,
		`name "bad name" of 127.2.0.0/16 is not 1 to 32 of a-z`,
		`name "held" is given twice`,
		`prefixes "held" (127.1.0.0/16) and "o" (127.1.2.0/24) share addresses`,
		"must be a comma-separated list of NAME=CIDR, NAME=FIRST-LAST or NAME=ADDRESS",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	var ee *envvar.Error
	if !errors.As(err, &ee) {
		t.Error("not an *envvar.Error")
	}
	var many []string
	for i := range MaxSourcePrefixes + 1 {
		many = append(many, fmt.Sprintf("p%d=127.0.%d.0/24", i, i))
	}
	if _, err := ConfigFromEnv(envMap(map[string]string{SourcePrefixesVar: strings.Join(many, ",")})); err == nil ||
		!strings.Contains(err.Error(), "17 prefixes are more than the 16 a server counts") {
		t.Errorf("17 prefixes: %v", err)
	}
	cfg, err := ConfigFromEnv(envMap(map[string]string{SourcePrefixesVar: strings.Join(many[:MaxSourcePrefixes], ",")}))
	if err != nil || len(cfg.SourcePrefixes) != MaxSourcePrefixes {
		t.Errorf("16 prefixes: %v %d", err, len(cfg.SourcePrefixes))
	}
	// Config.Validate applies the same rules to a configuration built in code.
	err = Config{SourcePrefixes: []SourcePrefix{{"a", netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.9")},
		{"B", netip.MustParseAddr("127.0.0.9"), netip.MustParseAddr("127.0.0.10")}, {"c", netip.Addr{}, netip.Addr{}}}}.Validate()
	for _, want := range []string{`name "B"`, `"a" (127.0.0.1-127.0.0.9) and "B" (127.0.0.9-127.0.0.10) share addresses`, `prefix "c"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate lacks %q: %v", want, err)
		}
	}
}

// The config: line is the seed's without prefixes and names them after its fields with them.
func TestConfigLineSourcePrefixes(t *testing.T) {
	cfg, err := ConfigFromEnv(envMap(map[string]string{SourcePrefixesVar: "held=127.1.0.0/16,hs=127.2.0.1-127.2.0.9"}))
	if err != nil {
		t.Fatal(err)
	}
	plain := cfg
	plain.SourcePrefixes = nil
	if got, want := ConfigLine(cfg), ConfigLine(plain)+" source_prefixes=held=127.1.0.0/16,hs=127.2.0.1-127.2.0.9"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for i := range 3 {
		if c := cfg.Share(3, i); !reflect.DeepEqual(c.SourcePrefixes, cfg.SourcePrefixes) {
			t.Errorf("child %d of 3 counts other prefixes: %v", i, c.SourcePrefixes)
		}
	}
}

// attemptFrom is one connection attempt from local: connect and TLS handshake. It returns the
// connection when the handshake completed, nil when the server closed it first.
func attemptFrom(t *testing.T, addr string, cfg *tls.Config, local string) *tls.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("connect from %s: %v", local, err)
	}
	tc := tls.Client(nc, cfg)
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		var ne net.Error
		if asNetErr(err, &ne) && ne.Timeout() {
			t.Fatalf("handshake from %s timed out", local)
		}
		nc.Close()
		return nil
	}
	_ = tc.SetDeadline(time.Time{})
	return tc
}

// sourceWorkload is the two-range client of the source-prefix tests: 10 attempts from the one
// address of "burst" (which exhausts its per-source handshake bucket) and 2 from each of the 8
// addresses of "spread" (which stays within it), then one from an address outside both ranges. It
// returns the established connections by range and the attempts that failed.
func sourceWorkload(t *testing.T, addr string, cfg *tls.Config) (conns map[string][]*tls.Conn, failed map[string]int) {
	conns, failed = map[string][]*tls.Conn{}, map[string]int{}
	try := func(rng, local string) {
		if c := attemptFrom(t, addr, cfg, local); c != nil {
			conns[rng] = append(conns[rng], c)
			t.Cleanup(func() { c.Close() })
		} else {
			failed[rng]++
		}
	}
	for range 10 {
		try("burst", "127.0.3.1")
	}
	for i := range 16 {
		try("spread", fmt.Sprintf("127.0.4.%d", i%8))
	}
	try("outside", "127.0.9.1")
	return conns, failed
}

const testSourcePrefixes = "burst=127.0.3.1,spread=127.0.4.0/29"

// checkSourceAccounting checks a quiet server's per-prefix counters against the client's outcomes
// exactly: attempts = accepted = admitted + shed, every failure a per-source shed, every success a
// completed handshake; and the prefixes plus the outside connection are the global counters.
func checkSourceAccounting(t *testing.T, m linkkeys.MetricsLine, conns map[string][]*tls.Conn, failed map[string]int) {
	t.Helper()
	if !slices.Equal(m.SourceNames(), []string{"burst", "spread"}) {
		t.Fatalf("prefixes %v", m.SourceNames())
	}
	for name, attempts := range map[string]int{"burst": 10, "spread": 16} {
		c := m.Source(name)
		ok, bad := uint64(len(conns[name])), uint64(failed[name])
		if c.Accepted != uint64(attempts) || c.Admitted+c.Shed() != c.Accepted || c.Established != ok ||
			c.ShedHandshakePerSource != bad || c.Shed() != bad || c.HandshakeRejections+c.HandshakeTimeouts != 0 || c.Admitted != ok {
			t.Errorf("%s: %d attempts, %d established, %d failed at the client; server %+v", name, attempts, ok, bad, *c)
		}
	}
	if b := m.Source("burst"); b.ShedHandshakePerSource == 0 || m.Source("spread").Shed() != 0 {
		t.Errorf("burst was not shed per source, or spread was: %+v", m.Sources)
	}
	var sum linkkeys.SourceCounters
	for _, c := range m.Sources {
		sum.Accepted += c.Accepted
		sum.Established += c.Established
	}
	if m.AcceptedConnections != sum.Accepted+1 || m.EstablishedTotal != sum.Established+uint64(len(conns["outside"])) {
		t.Errorf("global accepted %d established %d; prefixes %d and %d plus the outside connection",
			m.AcceptedConnections, m.EstablishedTotal, sum.Accepted, sum.Established)
	}
}

func sourceTestConfig() Config {
	cfg := permissive()
	cfg.Handshake.Burst, cfg.Handshake.RatePerMinute = 3, 1e-3
	cfg.PublicRead.Burst, cfg.PublicRead.RatePerMinute = 1, 1e-3
	cfg.SourcePrefixes, _ = ParseSourcePrefixes(testSourcePrefixes)
	return cfg
}

// TestSourcePrefixCountsExact: a client of two source ranges, one of which the per-source limiter
// sheds, gets each range's accounting exactly, closes and rate-limited answers included.
func TestSourcePrefixCountsExact(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: sourceTestConfig()})
	conns, failed := sourceWorkload(t, ts.Addr, ts.ClientTLSConfig())
	if len(conns["burst"]) != 3 || failed["burst"] != 7 || len(conns["spread"]) != 16 || failed["spread"] != 0 {
		t.Fatalf("client outcomes %d/%d burst, %d/%d spread", len(conns["burst"]), failed["burst"], len(conns["spread"]), failed["spread"])
	}
	quiet := func() bool {
		m := ts.Metrics()
		return m.HandshakesInProgress == 0 && m.Pending() == 0 && m.Source("spread").Established == 16
	}
	eventually(t, "quiet", quiet)
	checkSourceAccounting(t, ts.Metrics().MetricsLine, conns, failed)

	// A rate-limited answer and a close by reason count under the connection's prefix.
	spread := &client{t: t, tc: conns["spread"][0], br: newReader(conns["spread"][0])}
	for i := range 3 {
		if r := spread.call("DomainKeys", "get-domain-keys", []byte{0xa0}); (r.Status == linkkeys.StatusUnavailable) != (i > 0) {
			t.Fatalf("request %d: status %v", i, r.Status)
		}
	}
	if _, err := conns["burst"][0].Write([]byte{0x7f, 0, 0, 0}); err != nil { // a prefix over 1 MiB
		t.Fatal(err)
	}
	for _, c := range conns["spread"][1:] {
		c.Close()
	}
	eventually(t, "closes counted", func() bool {
		m := ts.Metrics()
		return m.Source("spread").ClosedByPeer == 15 && m.Source("burst").ClosedOversizedFrame == 1
	})
	m := ts.Metrics()
	if s := m.Source("spread"); s.RateLimitedResponses != 2 || m.RateLimitedResponses != 2 || m.Source("burst").RateLimitedResponses != 0 ||
		s.Closed() != 15 || m.Source("burst").Closed() != 1 || m.ClosedOversizedFrame != 1 {
		t.Errorf("after requests and closes: %+v", m.Sources)
	}
	line := linkkeys.FormatMetricsLine(m.MetricsLine)
	// The per-prefix fields come after every other field of the table (host_tcp_syncookies_sent last;
	// closed_shutdown off Linux, where the RSS split and the host TCP counters are left off).
	if !regexp.MustCompile(`("host_tcp_syncookies_sent":\d+|"closed_shutdown":0),"source_burst_accepted":10,"source_burst_admitted":3,`).MatchString(line) ||
		!strings.Contains(line, `"source_spread_rate_limited_responses":2}`) {
		t.Errorf("line %s", line)
	}
	if back, err := linkkeys.ParseMetricsLine(line); err != nil || !reflect.DeepEqual(back.Sources, m.Sources) {
		t.Errorf("line parses to %+v, %v", back.Sources, err)
	}
}

// TestMultiProcessSourcePrefixCounts: with --processes 2 the parent's sum of the children's
// per-prefix counters is exact against the same client, whichever child took each connection.
func TestMultiProcessSourcePrefixCounts(t *testing.T) {
	// Burst 4 over two processes is 2 per process: spread's two attempts per address always pass,
	// burst's ten from one address cannot.
	sv, addr, fp := startTestChildren(t, 2, SourcePrefixesVar+"="+testSourcePrefixes, "LKS_CHILD_HS_BURST=4")
	conns, failed := sourceWorkload(t, addr, linkkeys.ClientTLSConfig("multi.test", fp))
	if failed["burst"] == 0 || failed["spread"] != 0 || len(conns["burst"]) > 4 {
		t.Fatalf("client outcomes %d/%d burst, %d/%d spread", len(conns["burst"]), failed["burst"], len(conns["spread"]), failed["spread"])
	}
	parent := &Parent{Supervisor: sv}
	var sum Snapshot
	eventually(t, "quiet children", func() bool {
		sum = parent.Collect(false)
		return sum.HandshakesInProgress == 0 && sum.Pending() == 0 && sum.Source("spread") != nil && sum.Source("spread").Established == 16
	})
	checkSourceAccounting(t, sum.MetricsLine, conns, failed)
	per, err := sv.Snapshot(false, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if per[0].Source("spread").Accepted == 0 || per[1].Source("spread").Accepted == 0 {
		t.Logf("one child took every spread connection: %d and %d", per[0].Source("spread").Accepted, per[1].Source("spread").Accepted)
	}
	// The parent's line is a line like any other: the prefixes parse back from it.
	line := linkkeys.FormatMetricsLine(sum.MetricsLine)
	back, err := linkkeys.ParseMetricsLine(line)
	if err != nil || !reflect.DeepEqual(back.Sources, sum.Sources) {
		t.Fatalf("parent line %s: %+v %v", line, back.Sources, err)
	}
	final := parent.Finish(nil, 10*time.Second)
	if final.Label != "final" || final.Source("burst").Accepted != 10 {
		t.Errorf("final %+v", final.Sources)
	}
}

func TestPrometheusSourcePrefixes(t *testing.T) {
	s := sampleSnapshot()
	s.Sources = []linkkeys.SourceCounters{{Name: "held", Accepted: 5, Admitted: 4, ShedHandshakePerSource: 1, Established: 4, ClosedByPeer: 2},
		{Name: "ddos-1", Accepted: 7, ShedHandshakeOverflow: 7}}
	srv := httptest.NewServer(NewPrometheusExporter(func() Snapshot { return s }, false))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`linkkeys_server_source_accepted_connections_total{prefix="held"} 5`,
		`linkkeys_server_source_admitted_connections_total{prefix="held"} 4`,
		`linkkeys_server_source_shed_connections_total{prefix="held",reason="handshake_per_source"} 1`,
		`linkkeys_server_source_shed_connections_total{prefix="ddos-1",reason="handshake_overflow"} 7`,
		`linkkeys_server_source_established_total{prefix="held"} 4`,
		`linkkeys_server_source_closed_connections_total{prefix="held",reason="peer"} 2`,
		`linkkeys_server_source_rate_limited_responses_total{prefix="ddos-1"} 0`,
		"# TYPE linkkeys_server_source_shed_connections_total counter",
		"linkkeys_server_accepted_connections_total 1\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	// Without prefixes there is no per-prefix series at all.
	s.Sources = nil
	for name := range parseExposition(t, NewPrometheusExporter(func() Snapshot { return s }, false)) {
		if strings.HasPrefix(name, "linkkeys_server_source_") {
			t.Errorf("series %s without prefixes", name)
		}
	}
}

func FuzzParseSourcePrefixes(f *testing.F) {
	for _, s := range []string{testSourcePrefixes, "held=127.1.0.0/16,hs=127.2.0.0/16", "a=127.0.0.1-127.0.0.1,b=::1",
		"a=127.0.0.0/8,b=127.1.0.0/16", "x", "=", "a=", "a=1.2.3.4-", "a=::ffff:1.2.3.4/120", "a=fe80::1%eth0", ",,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ps, problems := ParseSourcePrefixes(raw)
		if len(problems) > 0 {
			return
		}
		if p := CheckSourcePrefixes(ps); len(p) > 0 || (Config{SourcePrefixes: ps}).Validate() != nil {
			t.Fatalf("%q parses to prefixes that do not check: %v", raw, p)
		}
		text := FormatSourcePrefixes(ps)
		back, problems := ParseSourcePrefixes(text)
		if len(problems) > 0 || !reflect.DeepEqual(back, ps) || FormatSourcePrefixes(back) != text {
			t.Fatalf("%q -> %q -> %v %v", raw, text, back, problems)
		}
		set := newSourceSet(ps)
		for i, p := range ps {
			if set.match(p.First) != uint8(i+1) || set.match(p.Last) != uint8(i+1) {
				t.Fatalf("%s does not match its own ends", p)
			}
		}
	})
}
