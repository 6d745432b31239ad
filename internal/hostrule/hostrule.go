// Package hostrule owns the one question every load command asks before it sends anything: may this
// target be loaded? Its rules are capacity's (docs/capacity.md, Host rules), used alike by the
// Keycast clients and plans, the LinkKeys clients and plans, and the workers of a distributed run:
//
//   - a local target runs without a flag: for URLs localhost, 127.0.0.1, [::1] and *.localhost (the
//     upstream rule); for a TCP address any loopback address (127.0.0.0/8, ::1) or localhost;
//   - any other host needs the exact --allow-host naming it, compared in canonical form (WHATWG URL
//     host parsing: case, IPv4 shorthand, IPv6 compression), so a stale plan or flag cannot
//     silently aim at another service;
//   - the production hosts, and any --refuse-host, are refused even when --allow-host names them.
//
// It imports nothing of ours, so every layer that loads may use it.
package hostrule

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// RefusedProductionHosts are upstream's production Keycast hosts. The rules always refuse them, even
// when --allow-host names them; Rules.RefuseHosts adds more.
var RefusedProductionHosts = []string{"login.divine.video", "keycast.divine.video"}

// ErrNotAllowed marks a target the rules refuse (a production host, or a non-local host without its
// --allow-host).
var ErrNotAllowed = errors.New("hostrule: target not allowed")

// Rules are one command's target authorization.
type Rules struct {
	// AllowHost authorizes exactly this non-local host (a host flag: see CanonicalHostFlag).
	AllowHost string
	// RefuseHosts are refused in addition to RefusedProductionHosts.
	RefuseHosts []string
}

// AuthorizeURL checks an http or https target URL: local hosts (IsLocalHost) pass, a non-local host
// needs the exact AllowHost, refused hosts never pass.
func (r Rules) AuthorizeURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: target %q is not an absolute URL", ErrNotAllowed, raw)
	}
	host, err := CanonicalHost(u.Hostname(), strings.HasPrefix(u.Host, "["))
	if err != nil {
		return fmt.Errorf("%w: target %q: %v", ErrNotAllowed, raw, err)
	}
	return r.authorize(host, IsLocalHost(host))
}

// AuthorizeHost checks a canonical URL host (CanonicalHost) with the URL rule for local hosts.
func (r Rules) AuthorizeHost(host string) error { return r.authorize(host, IsLocalHost(host)) }

// AuthorizeAddr checks a TCP target, "host:port" or a bare host: any loopback address or localhost
// passes (a LinkKeys client binds sources across 127.0.0.0/8, so the whole block is this machine);
// any other host needs the exact AllowHost.
func (r Rules) AuthorizeAddr(addr string) error {
	hostPart := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		hostPart = h
	}
	host, err := CanonicalHostFlag(hostPart)
	if err != nil {
		return fmt.Errorf("%w: target %q: %v", ErrNotAllowed, addr, err)
	}
	return r.authorize(host, IsLoopback(host))
}

func (r Rules) authorize(host string, local bool) error {
	if IsRefusedHost(host, r.RefuseHosts) {
		return fmt.Errorf("%w: %s is a refused production host", ErrNotAllowed, strings.TrimSuffix(host, "."))
	}
	if local {
		return nil
	}
	if allowed, err := CanonicalHostFlag(r.AllowHost); r.AllowHost != "" && err == nil && allowed == host {
		return nil
	}
	return fmt.Errorf("%w: non-local target %s needs the exact --allow-host %s", ErrNotAllowed, host, host)
}

// IsRefusedHost reports whether a canonical host (see CanonicalHost) is one of
// RefusedProductionHosts or of extra (host flags, normalised with CanonicalHostFlag; invalid ones are
// ignored). A trailing dot does not dodge the refusal. The Keycast client uses it too, to refuse
// --insecure-skip-verify against production.
func IsRefusedHost(host string, extra []string) bool {
	refused := slices.Clone(RefusedProductionHosts)
	for _, h := range extra {
		if c, err := CanonicalHostFlag(h); err == nil {
			refused = append(refused, c)
		}
	}
	return slices.Contains(refused, strings.TrimSuffix(host, "."))
}

// IsLocalHost reports whether a canonical URL host (see CanonicalHost) is local by upstream's rule:
// localhost, 127.0.0.1, [::1], or a name ending in .localhost.
func IsLocalHost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "[::1]" || strings.HasSuffix(host, ".localhost")
}

// IsLoopback reports whether a canonical host is this machine by address: localhost, *.localhost or
// a loopback address (127.0.0.0/8, ::1). TCP targets use it; URL targets keep upstream's narrower
// IsLocalHost.
func IsLoopback(host string) bool {
	if IsLocalHost(host) {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.IsLoopback()
}

// CanonicalHost normalises a URL host as the WHATWG URL parser does for http and https, so host
// comparisons mean what upstream's mean: DNS names lowercased; IPv4 in dotted decimal, including the
// shorthand forms the parser accepts ("127.1", "0x7f.0.0.1", "2130706433"); IPv6 compressed and in
// brackets. bracketed says the host was written as an IPv6 literal. Non-ASCII names are refused
// (write the punycode form); so are IPv6 zones, which no HTTP URL may carry.
func CanonicalHost(host string, bracketed bool) (string, error) {
	if host == "" {
		return "", errors.New("empty host")
	}
	if bracketed {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", fmt.Errorf("invalid IPv6 address %q", host)
		}
		return "[" + a.String() + "]", nil
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if c >= 0x80 {
			return "", fmt.Errorf("host %q is not ASCII; write its punycode (xn--) form", host)
		}
		if c <= ' ' || strings.IndexByte("#%/:<>?@[\\]^|", c) >= 0 {
			return "", fmt.Errorf("host %q contains the forbidden character %q", host, c)
		}
	}
	host = strings.ToLower(host)
	if ip, ok, err := whatwgIPv4(host); err != nil {
		return "", err
	} else if ok {
		return ip, nil
	}
	return host, nil
}

// CanonicalHostFlag normalises a host given on the command line (--allow-host, --refuse-host): the
// forms of CanonicalHost, plus an IPv6 address with or without brackets.
func CanonicalHostFlag(h string) (string, error) {
	h = strings.TrimSpace(h)
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return CanonicalHost(h[1:len(h)-1], true)
	}
	if strings.Contains(h, ":") {
		if _, err := netip.ParseAddr(h); err == nil {
			return CanonicalHost(h, true)
		}
		return "", fmt.Errorf("host %q must not carry a port or scheme", h)
	}
	return CanonicalHost(h, false)
}

// whatwgIPv4 applies the WHATWG "ends in a number" rule: a host whose last label is numeric is an
// IPv4 address, parsed with decimal, octal (leading 0) and hex (0x) parts, or the URL is invalid.
func whatwgIPv4(host string) (string, bool, error) {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if !isNumericLabel(last) {
		return "", false, nil
	}
	if len(parts) > 4 {
		return "", false, fmt.Errorf("host %q looks like an IPv4 address with too many parts", host)
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Part(p)
		if !ok {
			return "", false, fmt.Errorf("host %q is not a valid IPv4 address", host)
		}
		nums[i] = n
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return "", false, fmt.Errorf("host %q is not a valid IPv4 address", host)
		}
	}
	if nums[len(nums)-1] >= 1<<(8*(5-len(nums))) {
		return "", false, fmt.Errorf("host %q is not a valid IPv4 address", host)
	}
	ip := nums[len(nums)-1]
	for i, n := range nums[:len(nums)-1] {
		ip += n << (8 * (3 - i))
	}
	return fmt.Sprintf("%d.%d.%d.%d", byte(ip>>24), byte(ip>>16), byte(ip>>8), byte(ip)), true, nil
}

func isNumericLabel(s string) bool {
	if s == "" {
		return false
	}
	if strings.HasPrefix(s, "0x") {
		for _, c := range s[2:] {
			if !strings.ContainsRune("0123456789abcdef", c) {
				return false
			}
		}
		return true
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func parseIPv4Part(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case strings.HasPrefix(s, "0x"):
		base, s = 16, s[2:]
		if s == "" {
			return 0, true
		}
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	n, err := strconv.ParseUint(s, base, 64)
	if err != nil || n > math.MaxUint32 {
		return 0, false
	}
	return n, true
}
