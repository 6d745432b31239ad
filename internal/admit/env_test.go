package admit

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/envvar"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFromEnvDefaults(t *testing.T) {
	for _, tt := range []struct {
		name  string
		parse func(func(string) string) (LimiterConfig, error)
		want  LimiterConfig
	}{
		{"handshake", HandshakeConfigFromEnv, HandshakeDefaults()},
		{"public read", PublicReadConfigFromEnv, PublicReadDefaults()},
	} {
		for _, env := range []map[string]string{nil, blankAll()} {
			got, err := tt.parse(envOf(env))
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s with env %v:\n got %+v\nwant %+v", tt.name, env, got, tt.want)
			}
		}
	}
}

// blankAll sets every variable to white space, which counts as unset.
func blankAll() map[string]string {
	m := map[string]string{}
	for _, p := range []string{"TCP_HANDSHAKE_", "PUBLIC_READ_"} {
		for _, v := range []string{"RATE_PER_MINUTE", "BURST", "GLOBAL_RATE_PER_SECOND", "GLOBAL_BURST",
			"OVERFLOW_RATE_PER_SECOND", "OVERFLOW_BURST", "DISTINCT_SOURCE_THRESHOLD", "WINDOW_SECONDS",
			"IPV6_PREFIX", "TRUSTED_PROXIES"} {
			m[p+v] = "  "
		}
	}
	return m
}

// TestConfigFromEnvEveryVariable sets each variable alone and checks it lands
// in the right field, for both prefixes.
func TestConfigFromEnvEveryVariable(t *testing.T) {
	tests := []struct {
		suffix string
		value  string
		check  func(c LimiterConfig) bool
	}{
		{"RATE_PER_MINUTE", "120", func(c LimiterConfig) bool { return c.RatePerMinute == 120 }},
		{"BURST", "7", func(c LimiterConfig) bool { return c.Burst == 7 }},
		{"GLOBAL_RATE_PER_SECOND", "12.5", func(c LimiterConfig) bool { return c.GlobalRatePerSecond == 12.5 }},
		{"GLOBAL_BURST", "9", func(c LimiterConfig) bool { return c.GlobalBurst == 9 }},
		{"OVERFLOW_RATE_PER_SECOND", "1e3", func(c LimiterConfig) bool { return c.OverflowRatePerSecond == 1000 }},
		{"OVERFLOW_BURST", "3", func(c LimiterConfig) bool { return c.OverflowBurst == 3 }},
		{"DISTINCT_SOURCE_THRESHOLD", "18446744073709551615", func(c LimiterConfig) bool { return c.DistinctSourceThreshold == 1<<64-1 }},
		{"WINDOW_SECONDS", "5", func(c LimiterConfig) bool { return c.Window == 5*time.Second }},
		{"IPV6_PREFIX", "128", func(c LimiterConfig) bool { return c.IPv6Prefix == 128 }},
		{"IPV6_PREFIX", " 1 ", func(c LimiterConfig) bool { return c.IPv6Prefix == 1 }},
	}
	parsers := map[string]func(func(string) string) (LimiterConfig, error){
		"TCP_HANDSHAKE_": HandshakeConfigFromEnv,
		"PUBLIC_READ_":   PublicReadConfigFromEnv,
	}
	for prefix, parse := range parsers {
		for _, tt := range tests {
			name := prefix + tt.suffix
			t.Run(name+"="+tt.value, func(t *testing.T) {
				cfg, err := parse(envOf(map[string]string{name: tt.value}))
				if err != nil {
					t.Fatal(err)
				}
				if !tt.check(cfg) {
					t.Fatalf("%s=%q not applied: %+v", name, tt.value, cfg)
				}
			})
		}
	}
}

func TestConfigFromEnvRejectsBadValues(t *testing.T) {
	tests := []struct {
		suffix, value, accepted string
	}{
		{"RATE_PER_MINUTE", "0", "whole number greater than 0"},
		{"RATE_PER_MINUTE", "1.5", "whole number greater than 0"},
		{"BURST", "-1", "whole number greater than 0"},
		{"BURST", "abc", "whole number greater than 0"},
		{"GLOBAL_BURST", "18446744073709551616", "whole number greater than 0"},
		{"OVERFLOW_BURST", "0x10", "whole number greater than 0"},
		{"DISTINCT_SOURCE_THRESHOLD", "0", "whole number greater than 0"},
		{"GLOBAL_RATE_PER_SECOND", "0", "finite number greater than 0"},
		{"GLOBAL_RATE_PER_SECOND", "-2", "finite number greater than 0"},
		{"OVERFLOW_RATE_PER_SECOND", "NaN", "finite number greater than 0"},
		{"OVERFLOW_RATE_PER_SECOND", "inf", "finite number greater than 0"},
		{"OVERFLOW_RATE_PER_SECOND", "1e999", "finite number greater than 0"},
		{"WINDOW_SECONDS", "0", "whole number"},
		{"WINDOW_SECONDS", "9223372037", "from 1 to 9223372036"},
		{"IPV6_PREFIX", "0", "from 1 to 128"},
		{"IPV6_PREFIX", "129", "from 1 to 128"},
	}
	for _, prefix := range []string{"TCP_HANDSHAKE_", "PUBLIC_READ_"} {
		parse := HandshakeConfigFromEnv
		if prefix == "PUBLIC_READ_" {
			parse = PublicReadConfigFromEnv
		}
		for _, tt := range tests {
			name := prefix + tt.suffix
			t.Run(name+"="+tt.value, func(t *testing.T) {
				_, err := parse(envOf(map[string]string{name: tt.value}))
				if err == nil {
					t.Fatalf("%s=%q accepted", name, tt.value)
				}
				var ee *envvar.Error
				if !errors.As(err, &ee) || ee.Name != name || ee.Value != tt.value {
					t.Fatalf("error %v does not name %s=%q", err, name, tt.value)
				}
				want := name + `="` + tt.value + `": `
				if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, tt.accepted) {
					t.Fatalf("error %q: want prefix %q and %q", msg, want, tt.accepted)
				}
			})
		}
	}
}

func TestConfigFromEnvReportsEveryProblemAtOnce(t *testing.T) {
	_, err := PublicReadConfigFromEnv(envOf(map[string]string{
		"PUBLIC_READ_BURST":                  "0",
		"PUBLIC_READ_GLOBAL_RATE_PER_SECOND": "nan",
		"PUBLIC_READ_IPV6_PREFIX":            "200",
		"PUBLIC_READ_TRUSTED_PROXIES":        "10.0.0.1, bogus, 10.0.0.0/33",
		"PUBLIC_READ_WINDOW_SECONDS":         "30", // fine
	}))
	if err == nil {
		t.Fatal("bad values accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`PUBLIC_READ_BURST="0": must be a whole number greater than 0`,
		`PUBLIC_READ_GLOBAL_RATE_PER_SECOND="nan"`,
		`PUBLIC_READ_IPV6_PREFIX="200"`,
		`entry "bogus"`,
		`entry "10.0.0.0/33"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("joined error lacks %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n != 5 {
		t.Errorf("joined error has %d lines, want 5:\n%s", n, msg)
	}
	if strings.Contains(msg, "WINDOW") {
		t.Errorf("a good value was reported:\n%s", msg)
	}
}

func TestTrustedProxiesFromEnv(t *testing.T) {
	cfg, err := PublicReadConfigFromEnv(envOf(map[string]string{
		"PUBLIC_READ_TRUSTED_PROXIES": " 10.0.0.1 , 192.168.0.5/16 ,, ::1 ",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.1/32"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("::1/128"),
	}
	if !reflect.DeepEqual(cfg.TrustedProxies, want) {
		t.Fatalf("proxies = %v, want %v", cfg.TrustedProxies, want)
	}
	// The handshake limiter never reads a proxy list.
	hs, err := HandshakeConfigFromEnv(envOf(map[string]string{
		"PUBLIC_READ_TRUSTED_PROXIES":   "10.0.0.1",
		"TCP_HANDSHAKE_TRUSTED_PROXIES": "10.0.0.1",
	}))
	if err != nil || len(hs.TrustedProxies) != 0 {
		t.Fatalf("handshake proxies = %v, %v", hs.TrustedProxies, err)
	}
}

func TestEnvHelpers(t *testing.T) {
	tests := []struct {
		value string
		wantU uint64
		okU   bool
		wantF float64
		okF   bool
	}{
		{"", 42, true, 4.2, true},
		{"7", 7, true, 7, true},
		{"+7", 7, true, 7, true},
		{" 7\t", 7, true, 7, true},
		{"0.5", 0, false, 0.5, true},
		{"0", 0, false, 0, false},
		{"-0", 0, false, 0, false},
		{"1_000", 0, false, 0, false},
		{"0x1p4", 0, false, 0, false},
		{"Infinity", 0, false, 0, false},
	}
	for _, tt := range tests {
		get := envOf(map[string]string{"X": tt.value})
		u, err := envvar.Uint(get, "X", 42)
		if (err == nil) != tt.okU || (tt.okU && u != tt.wantU) {
			t.Errorf("envvar.Uint(%q) = %d, %v", tt.value, u, err)
		}
		f, err := envvar.Rate(get, "X", 4.2)
		if (err == nil) != tt.okF || (tt.okF && f != tt.wantF) {
			t.Errorf("envvar.Rate(%q) = %v, %v", tt.value, f, err)
		}
	}
}
