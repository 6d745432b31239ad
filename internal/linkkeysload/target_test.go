package linkkeysload

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// TestTargetOptionsResolve: the target comes from the info file (its host, 127.0.0.1 without one),
// key by key overridden by the flags; all three flags need no info file; a non-loopback target or
// metrics URL needs the exact --allow-host; the pid is kept only for the info file's own loopback
// server; every problem the command line can fix is a *UsageError.
func TestTargetOptionsResolve(t *testing.T) {
	dir := t.TempDir()
	fp := strings.Repeat("ab", 32)
	write := func(name string, info linkkeys.Info) string {
		p := filepath.Join(dir, name)
		if err := linkkeys.WriteInfo(p, info); err != nil {
			t.Fatal(err)
		}
		return p
	}
	local := write("local.json", linkkeys.Info{Port: 4433, Domain: "loadtest.local", Fingerprint: fp, PID: 77, MetricsAddr: "127.0.0.1:9100"})
	remote := write("remote.json", linkkeys.Info{Port: 4433, Domain: "loadtest.local", Fingerprint: fp, PID: 77, MetricsAddr: "0.0.0.0:9100", Host: "198.18.0.1"})
	remoteLoopMetrics := write("remote-lo.json", linkkeys.Info{Port: 4433, Domain: "loadtest.local", Fingerprint: fp, PID: 77, MetricsAddr: "127.0.0.1:9100", Host: "198.18.0.1"})
	missing := filepath.Join(dir, "nope.json")
	cases := []struct {
		name    string
		opts    TargetOptions
		addr    string
		pid     uint32
		metrics string // "" none
		usage   string // a *UsageError containing this
		other   bool   // an error that is not a usage error
		note    string
	}{
		{name: "info without host", opts: TargetOptions{InfoFile: local}, addr: "127.0.0.1:4433", pid: 77, metrics: "http://127.0.0.1:9100/metrics"},
		{name: "info host needs allow-host", opts: TargetOptions{InfoFile: remote}, usage: "non-local target 198.18.0.1 needs the exact --allow-host 198.18.0.1"},
		{name: "info host allowed", opts: TargetOptions{InfoFile: remote, Rules: hostrule.Rules{AllowHost: "198.18.0.1"}},
			addr: "198.18.0.1:4433", metrics: "http://198.18.0.1:9100/metrics"},
		{name: "remote loopback metrics dropped", opts: TargetOptions{InfoFile: remoteLoopMetrics, Rules: hostrule.Rules{AllowHost: "198.18.0.1"}},
			addr: "198.18.0.1:4433", note: "metrics_addr 127.0.0.1:9100 is the server's loopback"},
		{name: "flags alone", opts: TargetOptions{InfoFile: missing, Addr: "127.0.0.2:5000", Fingerprint: strings.ToUpper(fp), Domain: "x.test"}, addr: "127.0.0.2:5000"},
		{name: "flags alone, remote", opts: TargetOptions{InfoFile: missing, Addr: "198.18.0.7:5000", Fingerprint: fp, Domain: "x.test"},
			usage: "--target 198.18.0.7:5000: hostrule: target not allowed: non-local target 198.18.0.7 needs the exact --allow-host 198.18.0.7"},
		{name: "flags alone, remote allowed", opts: TargetOptions{InfoFile: missing, Addr: "198.18.0.7:5000", Fingerprint: fp, Domain: "x.test",
			Rules: hostrule.Rules{AllowHost: "198.18.0.7"}}, addr: "198.18.0.7:5000"},
		{name: "target overrides the info file", opts: TargetOptions{InfoFile: local, Addr: "127.0.0.1:5000"}, addr: "127.0.0.1:5000", metrics: "http://127.0.0.1:9100/metrics"},
		{name: "target only, no info file", opts: TargetOptions{InfoFile: missing, Addr: "127.0.0.1:5000"},
			usage: "--fingerprint, --domain not given and the info file cannot supply them"},
		{name: "nothing, no info file", opts: TargetOptions{InfoFile: missing}, other: true},
		{name: "given info file unreadable", opts: TargetOptions{InfoFile: missing, InfoFileGiven: true, Addr: "127.0.0.1:1", Fingerprint: fp, Domain: "d"},
			usage: "--info-file: reading info file"},
		{name: "bad fingerprint", opts: TargetOptions{InfoFile: local, Fingerprint: "abc"}, usage: `--fingerprint "abc": want the server key's SHA-256 as 64 hex characters`},
		{name: "bad port", opts: TargetOptions{InfoFile: local, Addr: "127.0.0.1:0"}, usage: `--target "127.0.0.1:0": want HOST:PORT (an IPv4 address or a name, and a port from 1 to 65535)`},
		{name: "no port", opts: TargetOptions{InfoFile: local, Addr: "127.0.0.1"}, usage: "want HOST:PORT"},
		{name: "ipv6", opts: TargetOptions{InfoFile: local, Addr: "[2001:db8::1]:4433", Rules: hostrule.Rules{AllowHost: "2001:db8::1"}}, usage: "IPv6 targets are not supported"},
		{name: "production host", opts: TargetOptions{InfoFile: local, Addr: "login.divine.video:443", Rules: hostrule.Rules{AllowHost: "login.divine.video"}},
			usage: "refused production host"},
		{name: "remote metrics URL", opts: TargetOptions{InfoFile: local, ServerMetrics: "http://198.18.0.9:9100/metrics"},
			usage: "--server-metrics http://198.18.0.9:9100/metrics: hostrule: target not allowed: non-local target 198.18.0.9 needs the exact --allow-host 198.18.0.9"},
		{name: "metrics log path", opts: TargetOptions{InfoFile: local, ServerMetrics: "server.log"}, addr: "127.0.0.1:4433", pid: 77, metrics: "server.log"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := c.opts.Resolve(context.Background())
			var ue *UsageError
			switch {
			case c.usage != "":
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.usage) {
					t.Fatalf("error %v (usage error: %v); want a usage error containing %q", err, ue != nil, c.usage)
				}
				return
			case c.other:
				if err == nil || errors.As(err, &ue) || !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("error %v; want the seed's unreadable info file error", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if got := r.Target.Addr.String(); got != c.addr {
				t.Errorf("target %s, want %s", got, c.addr)
			}
			if r.Target.PID != c.pid {
				t.Errorf("pid %d, want %d", r.Target.PID, c.pid)
			}
			if r.Target.Fingerprint != fp {
				t.Errorf("fingerprint %q", r.Target.Fingerprint)
			}
			got := ""
			if r.Metrics != nil {
				got = r.Metrics.Location
			}
			if got != c.metrics {
				t.Errorf("metrics %q, want %q", got, c.metrics)
			}
			if c.note != "" && !strings.Contains(strings.Join(r.Notes, "\n"), c.note) {
				t.Errorf("notes %q lack %q", r.Notes, c.note)
			}
		})
	}
}

// TestCheckSourcesBind: 127.0.0.0/8 addresses bind on Linux; an address this machine does not
// have (in the benchmarking range, assigned nowhere here) is refused with the commands that add it;
// a loopback source cannot reach a remote target.
func TestCheckSourcesBind(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("all of 127.0.0.0/8 is local only on Linux")
	}
	lo := netip.MustParseAddrPort("127.0.0.1:4433")
	if _, err := CheckSources(lo, []SourceUse{{Range: SourceRange{"held", mustIP("127.0.40.0"), 5000}, Sockets: 5000, MustHold: true},
		{Range: SourceRange{"handshakes", mustIP("127.200.0.1"), 3}, Sockets: 8}}, nil); err != nil {
		t.Fatalf("loopback sources refused: %v", err)
	}
	absent := mustIP("198.18.255.254")
	if CanBind(absent) == nil {
		t.Skipf("this machine binds %s (assigned, or net.ipv4.ip_nonlocal_bind=1): the refusal cannot be shown here", absent)
	}
	_, err := CheckSources(lo, []SourceUse{{Range: SourceRange{"connections", absent, 1}, Sockets: 10, MustHold: true}}, nil)
	var ue *UsageError
	if !errors.As(err, &ue) {
		t.Fatalf("error %v; want a usage error", err)
	}
	for _, want := range []string{"stream connections: this machine cannot bind source address 198.18.255.254 (1 of the 1 checked of 198.18.255.254+1",
		"`ip addr add 198.18.255.254/32 dev IFACE`", "`ip route add local 198.18.255.254/32 dev lo`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	_, err = CheckSources(netip.MustParseAddrPort("198.18.0.1:4433"), []SourceUse{{Range: SourceRange{"ddos", mustIP("127.5.0.0"), 100}, Sockets: 10}}, nil)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "are loopback addresses, which cannot reach 198.18.0.1") {
		t.Errorf("a loopback source toward a remote target: %v", err)
	}
}

// TestCheckSourcesSample: a large range is probed at 64 spread addresses, first and last among
// them, and the missing ones are named first-first with the prefix covering the range.
func TestCheckSourcesSample(t *testing.T) {
	r := SourceRange{"held", mustIP("198.18.0.0"), 1 << 16}
	probes := probeAddrs(r)
	if len(probes) != maxBindProbes || probes[0] != r.First || probes[len(probes)-1] != r.Last() {
		t.Fatalf("%d probes from %s to %s; want %d from %s to %s", len(probes), probes[0], probes[len(probes)-1], maxBindProbes, r.First, r.Last())
	}
	if n := len(probeAddrs(SourceRange{"x", mustIP("127.0.0.1"), 10})); n != 10 {
		t.Errorf("a range of 10 is probed at %d addresses, want all 10", n)
	}
	// Only the upper half of the range is there.
	bind := func(a IPv4) error {
		if a >= mustIP("198.18.128.0") {
			return nil
		}
		return errors.New("cannot assign requested address")
	}
	_, err := CheckSources(netip.MustParseAddrPort("198.18.200.1:1"), []SourceUse{{Range: r, Sockets: 1}}, bind)
	if err == nil || !strings.Contains(err.Error(), "198.18.0.0, ") || !strings.Contains(err.Error(), "`ip route add local 198.18.0.0/16 dev lo`") ||
		!strings.Contains(err.Error(), "and 28 more (32 of the 64 checked") {
		t.Errorf("error %v", err)
	}
}

// TestCheckSourcesPortBudget: more sockets per source than the ephemeral port range is a warning
// for a loop's concurrency and an error for a population held at once.
func TestCheckSourcesPortBudget(t *testing.T) {
	size, ok := LocalPortRange()
	if !ok {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range here")
	}
	ok2 := func(IPv4) error { return nil }
	lo := netip.MustParseAddrPort("127.0.0.1:1")
	r := SourceRange{"held", mustIP("127.0.1.0"), 2}
	if w, err := CheckSources(lo, []SourceUse{{Range: r, Sockets: 2 * size, MustHold: true}}, ok2); err != nil || len(w) != 0 {
		t.Errorf("exactly the budget: %v %v", w, err)
	}
	_, err := CheckSources(lo, []SourceUse{{Range: r, Sockets: 2*size + 1, MustHold: true}}, ok2)
	if err == nil || !strings.Contains(err.Error(), "per (source, destination) pair, above the") || !strings.Contains(err.Error(), "give at least 3 source addresses") {
		t.Errorf("held over the budget: %v", err)
	}
	w, err := CheckSources(lo, []SourceUse{{Range: r, Sockets: 2*size + 1}}, ok2)
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "3 source addresses would be enough") {
		t.Errorf("concurrency over the budget: %v %v", w, err)
	}
}
