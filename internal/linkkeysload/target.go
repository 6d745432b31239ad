package linkkeysload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// ServerHints are optional keys a server may add to its info file beyond the four the seed
// defines: where its METRICS can be read. Clients that know them use them for the server's
// accounting when --server-metrics is not given; others ignore them.
type ServerHints struct {
	// MetricsAddr is the host:port of the server's Prometheus endpoint (info key "metrics_addr").
	MetricsAddr string
	// MetricsLog is the path of a file holding the server's METRICS lines (info key "metrics_log").
	MetricsLog string
	// Host is the host the server is reached at (the info file's "host", or --target's host);
	// empty means 127.0.0.1. An unspecified metrics_addr host (0.0.0.0, ::) means this host.
	Host string
}

// LoadTarget reads an info file: the target (via linkkeys.ReadInfo, which requires the seed's four
// keys) and the optional hints.
func LoadTarget(path string) (Target, ServerHints, error) {
	info, err := linkkeys.ReadInfo(path)
	if err != nil {
		return Target{}, ServerHints{}, err
	}
	h := ServerHints{Host: info.Host}
	if b, err := boundedfile.Read(path, boundedfile.Info); err == nil {
		var extra struct {
			MetricsAddr string `json:"metrics_addr"`
			MetricsLog  string `json:"metrics_log"`
		}
		if json.Unmarshal(b, &extra) == nil {
			h.MetricsAddr, h.MetricsLog = extra.MetricsAddr, extra.MetricsLog
		}
	}
	return TargetFromInfo(info), h, nil
}

// ResolveMetrics chooses where the server's counters are read: flag (a METRICS log path or an
// http(s) URL) when given, else the info file's metrics_addr (as http://addr/metrics; an
// unspecified host there means the server's own host, h.Host, else 127.0.0.1), else its
// metrics_log; nil when none is known.
func ResolveMetrics(flag string, h ServerHints) *MetricsSource {
	switch {
	case flag != "":
		return &MetricsSource{Location: flag}
	case h.MetricsAddr != "":
		addr := h.MetricsAddr
		if host, port, err := net.SplitHostPort(addr); err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
			addr = net.JoinHostPort(cmp(h.Host, "127.0.0.1"), port)
		}
		if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
			return &MetricsSource{Location: addr}
		}
		return &MetricsSource{Location: "http://" + addr + "/metrics"}
	case h.MetricsLog != "":
		return &MetricsSource{Location: h.MetricsLog}
	}
	return nil
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// UsageError is a client setup the command line got wrong (a missing or malformed target, a
// refused host, source addresses this machine does not have): the cli exits 2 with it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf("linkkeysload: "+format, args...)}
}

// TargetOptions say which server a client loads: the info file's target, overridden key by key by
// --target, --fingerprint and --domain, and the host rules the target must pass. With all three
// flags the info file is not read unless InfoFileGiven.
type TargetOptions struct {
	// InfoFile is the server's info file (--info-file); InfoFileGiven says the flag was given.
	InfoFile      string
	InfoFileGiven bool
	// Addr is --target HOST:PORT (a name, an IPv4 address or [IPv6]:port).
	Addr string
	// Fingerprint is --fingerprint: the server key's SHA-256, 64 hex characters.
	Fingerprint string
	// Domain is --domain: the server's domain (its certificate's name).
	Domain string
	// ServerMetrics is --server-metrics: a METRICS log file or an http(s) URL.
	ServerMetrics string
	// Rules authorize the target and an http(s) metrics URL (hostrule: loopback passes, any other
	// host needs the exact --allow-host).
	Rules hostrule.Rules
	// Resolver looks target names up; nil means net.DefaultResolver.
	Resolver *net.Resolver
}

// ResolvedTarget is where a client goes: the target, the info file's hints and the server's
// metrics source (nil: none known), with notes worth a warning.
type ResolvedTarget struct {
	Target  Target
	Hints   ServerHints
	Metrics *MetricsSource
	// Notes say what was left out and why (a remote server's loopback-only metrics address).
	Notes []string
}

// Loopback reports whether the target is on this machine (a loopback address).
func (r ResolvedTarget) Loopback() bool { return r.Target.Addr.Addr().IsLoopback() }

// Validate checks what the flags say on their own, before any file or name is read: --target's
// form and host rule, --fingerprint, --domain and a --server-metrics URL's host rule. Every problem
// is a *UsageError. Resolve calls it first.
func (o TargetOptions) Validate() error {
	if o.Addr != "" {
		host, port, err := net.SplitHostPort(o.Addr)
		if n, perr := strconv.ParseUint(port, 10, 16); err != nil || host == "" || perr != nil || n == 0 {
			return usagef("--target %q: want HOST:PORT (an IPv4 address or a name, and a port from 1 to 65535)", o.Addr)
		}
		if err := o.Rules.AuthorizeAddr(o.Addr); err != nil {
			return usagef("--target %s: %v", o.Addr, err)
		}
	}
	if o.Fingerprint != "" && !isHex64(strings.ToLower(o.Fingerprint)) {
		return usagef("--fingerprint %q: want the server key's SHA-256 as 64 hex characters (the info file's fingerprint)", o.Fingerprint)
	}
	if strings.ContainsAny(o.Domain, " \t\r\n/") {
		return usagef("--domain %q: want the server's domain name", o.Domain)
	}
	if m := o.ServerMetrics; strings.HasPrefix(m, "http://") || strings.HasPrefix(m, "https://") {
		if err := o.Rules.AuthorizeURL(m); err != nil {
			return usagef("--server-metrics %s: %v", m, err)
		}
	}
	return nil
}

// Resolve validates the options once and returns the target. Every problem the command line can
// fix is a *UsageError; an info file that is needed but unreadable keeps the seed's error (exit 1)
// when no target flag was given.
func (o TargetOptions) Resolve(ctx context.Context) (ResolvedTarget, error) {
	if err := o.Validate(); err != nil {
		return ResolvedTarget{}, err
	}
	var missing []string
	if o.Addr == "" {
		missing = append(missing, "--target")
	}
	if o.Fingerprint == "" {
		missing = append(missing, "--fingerprint")
	}
	if o.Domain == "" {
		missing = append(missing, "--domain")
	}
	var (
		info     linkkeys.Info
		haveInfo bool
		hints    ServerHints
	)
	if len(missing) > 0 || o.InfoFileGiven {
		t, h, err := LoadTarget(o.InfoFile)
		switch {
		case err == nil:
			haveInfo, hints = true, h
			info = linkkeys.Info{Port: t.Addr.Port(), Domain: t.Domain, Fingerprint: t.Fingerprint, PID: t.PID, Host: h.Host}
		case len(missing) == 3:
			return ResolvedTarget{}, err // the seed's client: no info file, no target
		case len(missing) > 0:
			return ResolvedTarget{}, usagef("%s not given and the info file cannot supply them (%v): give the server's info file, or all of --target, --fingerprint and --domain",
				strings.Join(missing, ", "), err)
		default:
			return ResolvedTarget{}, usagef("--info-file: %v", err)
		}
	}
	var r ResolvedTarget
	// The address: --target, else the info file's host (127.0.0.1 without one) and port.
	addrText, from := o.Addr, "--target"
	if addrText == "" {
		addrText, from = net.JoinHostPort(info.TargetHost(), strconv.Itoa(int(info.Port))), "the info file's host"
	}
	host, portText, err := net.SplitHostPort(addrText)
	if err != nil || host == "" {
		return r, usagef("%s %q: want HOST:PORT (an IPv4 address or a name, and a port)", from, addrText)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return r, usagef("%s %q: port %q is not a number from 1 to 65535", from, addrText, portText)
	}
	if err := o.Rules.AuthorizeAddr(addrText); err != nil {
		return r, usagef("%s %s: %v", from, addrText, err)
	}
	ip, err := o.lookup(ctx, host)
	if err != nil {
		return r, usagef("%s %q: %v", from, addrText, err)
	}
	r.Target.Addr = netip.AddrPortFrom(ip, uint16(port))
	if host != ip.String() && !ip.IsLoopback() {
		// A name resolving to another host than the one --allow-host checked is fine: the rule is
		// on the name the operator wrote. Say where it went.
		r.Notes = append(r.Notes, fmt.Sprintf("target %s resolved to %s", host, ip))
	}
	r.Target.Fingerprint = strings.ToLower(o.Fingerprint)
	if r.Target.Fingerprint == "" {
		r.Target.Fingerprint = info.Fingerprint
	}
	if !isHex64(r.Target.Fingerprint) {
		return r, usagef("--fingerprint %q: want the server key's SHA-256 as 64 hex characters (the info file's fingerprint)", o.Fingerprint)
	}
	r.Target.Domain = o.Domain
	if r.Target.Domain == "" {
		r.Target.Domain = info.Domain
	}
	if strings.ContainsAny(r.Target.Domain, " \t\r\n/") {
		return r, usagef("--domain %q: want the server's domain name", r.Target.Domain)
	}
	// The pid is only meaningful on this machine, and only for the server the info file describes.
	if haveInfo && ip.IsLoopback() && r.Target.Addr == TargetFromInfo(info).Addr {
		r.Target.PID = info.PID
	}
	hints.Host = ip.String()
	if !haveInfo {
		hints = ServerHints{Host: ip.String()}
	}
	if !ip.IsLoopback() {
		// A remote server's metrics on loopback, or its METRICS log, are on its machine, not here.
		if mh, _, err := net.SplitHostPort(hints.MetricsAddr); err == nil {
			if a, err := netip.ParseAddr(mh); err == nil && a.IsLoopback() {
				r.Notes = append(r.Notes, fmt.Sprintf("the info file's metrics_addr %s is the server's loopback, unreachable from here; give --server-metrics", hints.MetricsAddr))
				hints.MetricsAddr = ""
			}
		}
		if hints.MetricsLog != "" && o.ServerMetrics == "" {
			r.Notes = append(r.Notes, fmt.Sprintf("the info file's metrics_log %s is on the server's machine; not read", hints.MetricsLog))
			hints.MetricsLog = ""
		}
	}
	r.Hints = hints
	r.Metrics = ResolveMetrics(o.ServerMetrics, hints)
	if m := r.Metrics; m != nil && (strings.HasPrefix(m.Location, "http://") || strings.HasPrefix(m.Location, "https://")) {
		if err := o.Rules.AuthorizeURL(m.Location); err != nil {
			what := "--server-metrics"
			if o.ServerMetrics == "" {
				what = "the info file's metrics_addr"
			}
			return r, usagef("%s %s: %v", what, m.Location, err)
		}
	}
	return r, nil
}

// lookup turns the target's host into one IPv4 address: the clients bind IPv4 source addresses.
func (o TargetOptions) lookup(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		a = a.Unmap()
		if !a.Is4() {
			return netip.Addr{}, errors.New("IPv6 targets are not supported: the clients bind IPv4 source addresses; give the server's IPv4 address")
		}
		return a, nil
	}
	if host == "localhost" {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
	}
	res := o.Resolver
	if res == nil {
		res = net.DefaultResolver
	}
	addrs, err := res.LookupNetIP(ctx, "ip4", host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("cannot resolve %s to an IPv4 address: %v", host, err)
	}
	return addrs[0].Unmap(), nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
