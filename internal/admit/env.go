package admit

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/loadproof/loadproof/internal/envvar"
)

// envPrefix reads name as an IPv6 prefix length, 1..128.
func envPrefix(getenv func(string) string, name string, def int) (int, error) {
	v, err := envvar.Uint(getenv, name, uint64(def))
	if err != nil || v > 128 {
		return def, &envvar.Error{Name: name, Value: getenv(name), Accepted: "must be a whole number from 1 to 128"}
	}
	return int(v), nil
}

// ParseTrustedProxies parses a comma-separated list of IP addresses and
// CIDRs. Blank entries are skipped; a bare address becomes a /32 or /128;
// host bits in a CIDR are cleared. name is the variable named in errors;
// every bad entry is reported, joined.
func ParseTrustedProxies(name, raw string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for entry := range strings.SplitSeq(raw, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if strings.Contains(entry, "/") {
			p, err := netip.ParsePrefix(entry)
			if err == nil {
				out = append(out, p.Masked())
				continue
			}
		} else if ip, err := netip.ParseAddr(entry); err == nil && ip.Zone() == "" {
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		errs = append(errs, &envvar.Error{Name: name, Value: raw,
			Accepted: fmt.Sprintf("entry %q is not an IP address or CIDR; use a comma-separated list such as 10.0.0.1,192.168.0.0/16,::1", entry)})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// configFromEnv reads the nine limiter variables sharing prefix, over def.
func configFromEnv(getenv func(string) string, prefix string, def LimiterConfig) (LimiterConfig, []error) {
	cfg := def
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var u uint64
	var err error
	u, err = envvar.Uint(getenv, prefix+"RATE_PER_MINUTE", uint64(def.RatePerMinute))
	note(err)
	cfg.RatePerMinute = float64(u)
	u, err = envvar.Uint(getenv, prefix+"BURST", uint64(def.Burst))
	note(err)
	cfg.Burst = float64(u)
	cfg.GlobalRatePerSecond, err = envvar.Rate(getenv, prefix+"GLOBAL_RATE_PER_SECOND", def.GlobalRatePerSecond)
	note(err)
	u, err = envvar.Uint(getenv, prefix+"GLOBAL_BURST", uint64(def.GlobalBurst))
	note(err)
	cfg.GlobalBurst = float64(u)
	cfg.OverflowRatePerSecond, err = envvar.Rate(getenv, prefix+"OVERFLOW_RATE_PER_SECOND", def.OverflowRatePerSecond)
	note(err)
	u, err = envvar.Uint(getenv, prefix+"OVERFLOW_BURST", uint64(def.OverflowBurst))
	note(err)
	cfg.OverflowBurst = float64(u)
	cfg.DistinctSourceThreshold, err = envvar.Uint(getenv, prefix+"DISTINCT_SOURCE_THRESHOLD", def.DistinctSourceThreshold)
	note(err)
	cfg.Window, err = envvar.Seconds(getenv, prefix+"WINDOW_SECONDS", def.Window)
	note(err)
	cfg.IPv6Prefix, err = envPrefix(getenv, prefix+"IPV6_PREFIX", def.IPv6Prefix)
	note(err)
	return cfg, errs
}

// HandshakeConfigFromEnv reads the TCP_HANDSHAKE_* variables
// (docs/protocol-linkkeys.md, Environment variables) over HandshakeDefaults:
// RATE_PER_MINUTE, BURST, GLOBAL_BURST, OVERFLOW_BURST,
// DISTINCT_SOURCE_THRESHOLD and WINDOW_SECONDS are whole numbers greater
// than 0; GLOBAL_RATE_PER_SECOND and OVERFLOW_RATE_PER_SECOND are finite
// numbers greater than 0; IPV6_PREFIX is 1..128. Blank means unset. There are never trusted proxies. Every problem
// is reported, joined with errors.Join; on error the returned config holds
// the defaults for the bad variables.
func HandshakeConfigFromEnv(getenv func(string) string) (LimiterConfig, error) {
	cfg, errs := configFromEnv(getenv, "TCP_HANDSHAKE_", HandshakeDefaults())
	return cfg, errors.Join(errs...)
}

// PublicReadConfigFromEnv reads the PUBLIC_READ_* variables
// (docs/protocol-linkkeys.md, Environment variables) over
// PublicReadDefaults, with the rules of HandshakeConfigFromEnv, plus
// PUBLIC_READ_TRUSTED_PROXIES: a comma-separated list of IP addresses (taken
// as /32 or /128) and CIDRs. Every problem is
// reported, joined with errors.Join.
func PublicReadConfigFromEnv(getenv func(string) string) (LimiterConfig, error) {
	cfg, errs := configFromEnv(getenv, "PUBLIC_READ_", PublicReadDefaults())
	proxies, err := ParseTrustedProxies("PUBLIC_READ_TRUSTED_PROXIES", getenv("PUBLIC_READ_TRUSTED_PROXIES"))
	if err != nil {
		errs = append(errs, err)
	}
	cfg.TrustedProxies = proxies
	return cfg, errors.Join(errs...)
}
