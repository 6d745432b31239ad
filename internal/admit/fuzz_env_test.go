package admit

import (
	"errors"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/envvar"
)

var envSuffixes = []string{"RATE_PER_MINUTE", "BURST", "GLOBAL_RATE_PER_SECOND", "GLOBAL_BURST",
	"OVERFLOW_RATE_PER_SECOND", "OVERFLOW_BURST", "DISTINCT_SOURCE_THRESHOLD", "WINDOW_SECONDS",
	"IPV6_PREFIX", "TRUSTED_PROXIES"}

func FuzzEnvParse(f *testing.F) {
	for i := range envSuffixes {
		for _, v := range []string{"", "0", "1", "64", "129", "1.5", "-1", "nan", "inf", "1e308", "18446744073709551616",
			"10.0.0.1,::1/64", "bogus", " 7 "} {
			f.Add(uint8(i), v, false)
			f.Add(uint8(i), v, true)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, value string, handshake bool) {
		prefix, parse := "PUBLIC_READ_", PublicReadConfigFromEnv
		if handshake {
			prefix, parse = "TCP_HANDSHAKE_", HandshakeConfigFromEnv
		}
		name := prefix + envSuffixes[int(which)%len(envSuffixes)]
		cfg, err := parse(envOf(map[string]string{name: value}))
		if err != nil {
			var ee *envvar.Error
			if !errors.As(err, &ee) || ee.Name != name || ee.Value != value {
				t.Fatalf("%s=%q: error %v does not name the variable and value", name, value, err)
			}
			if !strings.Contains(err.Error(), name+"=") {
				t.Fatalf("message %q lacks %s=", err, name)
			}
			return
		}
		if verr := cfg.Validate(); verr != nil {
			t.Fatalf("%s=%q parsed to an invalid config: %v", name, value, verr)
		}
		if cfg.IPv6Prefix < 1 || cfg.IPv6Prefix > 128 || cfg.Window <= 0 || cfg.DistinctSourceThreshold == 0 {
			t.Fatalf("%s=%q: out-of-range config %+v", name, value, cfg)
		}
		NewLimiter(cfg, &ManualClock{}).Check(SourceKey{})
	})
}
