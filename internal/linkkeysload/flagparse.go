package linkkeysload

import (
	"fmt"
	"strconv"
	"strings"
)

// The parsers of the client flags whose values are this package's types: a --ddos-wave value (a
// DDoSWave of the combined run) and request-bench's --rate (RequestConfig.Rate). Their errors are
// *UsageError (the cli exits 2 with them) and name the flag and the value, as the cli's did.

// MaxRate is the highest request rate, per second, --rate accepts.
const MaxRate = 1e9

// ParseRate reads --rate: empty for the closed model (0), else a finite number above 0 and at most
// MaxRate, surrounding spaces ignored.
func ParseRate(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !validRate(r) {
		return 0, &UsageError{Err: fmt.Errorf("invalid --rate %q: want requests per second, a number above 0 and at most 1e9", s)}
	}
	return r, nil
}

// validRate is a rate --rate may give: above 0 and at most MaxRate (NaN is neither).
func validRate(r float64) bool { return r > 0 && r <= MaxRate }

// Defaults of a --ddos-wave value's keys.
const (
	// DefaultWaveConcurrency is a wave's attempts in flight when concurrency= is not given.
	DefaultWaveConcurrency = 500
	// MaxWaveStartSecs is the latest a wave may start (at=), in seconds after the run's start.
	MaxWaveStartSecs = 86400
)

// ParseDDoSWave reads one --ddos-wave value: comma-separated key=value pairs, sources required,
// at (seconds, default 0), concurrency (default DefaultWaveConcurrency), base (default next, or
// DefaultDDoSBase when next is 0) and name. Every problem is reported at once, in a *UsageError
// that quotes the value: `--ddos-wave "at=x": at="x": want seconds from 0 to 86400; …`.
func ParseDDoSWave(s string, next IPv4) (DDoSWave, error) {
	w := DDoSWave{Concurrency: DefaultWaveConcurrency, Base: next}
	if w.Base == 0 {
		b, _ := ParseIPv4("base", DefaultDDoSBase)
		w.Base = b
	}
	var problems []string
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			problems = append(problems, fmt.Sprintf("%q is not key=value", part))
			continue
		}
		if seen[k] {
			problems = append(problems, fmt.Sprintf("%s given twice", k))
			continue
		}
		seen[k] = true
		switch k {
		case "sources", "concurrency":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				problems = append(problems, fmt.Sprintf("%s=%q: want a whole number from 1 to 4294967295", k, v))
				continue
			}
			if k == "sources" {
				w.Sources = uint32(n)
			} else {
				w.Concurrency = uint32(n)
			}
		case "at":
			f, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64)
			if err != nil || f < 0 || f != f || f > MaxWaveStartSecs {
				problems = append(problems, fmt.Sprintf("at=%q: want seconds from 0 to %d", v, MaxWaveStartSecs))
				continue
			}
			w.StartSecs = f
		case "base":
			b, err := ParseIPv4("base", v)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			w.Base = b
		case "name":
			w.Name = v
		default:
			problems = append(problems, fmt.Sprintf("unknown key %q (want sources, at, concurrency, base or name)", k))
		}
	}
	if !seen["sources"] {
		problems = append(problems, "sources=N is required")
	}
	if len(problems) > 0 {
		return DDoSWave{}, &UsageError{Err: fmt.Errorf("--ddos-wave %q: %s", s, strings.Join(problems, "; "))}
	}
	return w, nil
}
