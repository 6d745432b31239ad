// Package durflag owns the command-line values of durations: every duration flag of loadproof
// accepts a bare number of seconds ("10", as the seeds' --duration-secs and Keycast's --duration
// take it) and a Go duration with its unit ("10s", "1m30s", "500ms"), so neither spelling fails.
package durflag

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Max is the longest duration a flag accepts: longer is a typo, not a load test.
const Max = 365 * 24 * time.Hour

// maxText bounds the text parsed, so a hostile value costs nothing to refuse.
const maxText = 64

// Parse reads a duration: a bare non-negative number is seconds ("10", "2.5"), anything else a Go
// duration ("10s", "1m30s", "250ms"). Negative, non-finite and longer-than-Max values are refused
// with a message naming the problem.
func Parse(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration: give seconds (10) or a duration with its unit (10s, 1m30s, 500ms)")
	}
	if len(s) > maxText {
		return 0, fmt.Errorf("duration %.20q… is %d characters long: give seconds (10) or a duration with its unit (10s)", s, len(s))
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("duration %q is not a number of seconds", s)
		}
		if f < 0 {
			return 0, fmt.Errorf("duration %q is negative", s)
		}
		if f > Max.Seconds() {
			return 0, fmt.Errorf("duration %q seconds is longer than %s", s, Max)
		}
		return time.Duration(math.Round(f * float64(time.Second))), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: give seconds (10) or a duration with its unit (10s, 1m30s, 500ms)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	if d > Max {
		return 0, fmt.Errorf("duration %q is longer than %s", s, Max)
	}
	return d, nil
}

// Seconds is a flag value kept as whole seconds (the seeds' --duration-secs, --hold-secs, Keycast's
// --duration): it takes Parse's forms and refuses a fraction of a second.
type Seconds struct{ p *uint64 }

// NewSeconds sets *p to def and returns the flag value that writes *p.
func NewSeconds(p *uint64, def uint64) *Seconds {
	*p = def
	return &Seconds{p: p}
}

// Set implements pflag.Value.
func (v *Seconds) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	if d%time.Second != 0 {
		return fmt.Errorf("duration %q: this flag counts whole seconds (%s is not)", s, d)
	}
	*v.p = uint64(d / time.Second)
	return nil
}

// String implements pflag.Value: the value in seconds, as the seeds print it.
func (v *Seconds) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatUint(*v.p, 10)
}

// Type implements pflag.Value: the placeholder help shows.
func (v *Seconds) Type() string { return "duration" }

// Duration is a flag value kept as a time.Duration that also takes a bare number of seconds.
type Duration struct{ p *time.Duration }

// NewDuration sets *p to def and returns the flag value that writes *p.
func NewDuration(p *time.Duration, def time.Duration) *Duration {
	*p = def
	return &Duration{p: p}
}

// Set implements pflag.Value.
func (v *Duration) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*v.p = d
	return nil
}

// String implements pflag.Value.
func (v *Duration) String() string {
	if v == nil || v.p == nil {
		return "0s"
	}
	return v.p.String()
}

// Type implements pflag.Value.
func (v *Duration) Type() string { return "duration" }
