// Package envvar reads environment variables for the servers' configurations: whole numbers,
// rates and seconds, each rejected with an *Error that names the variable, the value as set and
// what is accepted, so a server can report every bad variable at once (errors.Join) and refuse to
// start. A blank value means the default everywhere.
package envvar

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Error is one environment variable that could not be used. Its message
// names the variable, the value and what is accepted, for example
// `TCP_HANDSHAKE_BURST="0": must be a whole number greater than 0`.
type Error struct {
	Name     string // the variable
	Value    string // the value as set
	Accepted string // what would have been accepted
}

// Error returns `NAME="value": what is accepted`.
func (e *Error) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Name, e.Value, e.Accepted)
}

const (
	acceptUint = "must be a whole number greater than 0"
	acceptRate = "must be a finite number greater than 0 (decimals allowed)"
)

// IsBlank reports whether an environment value counts as unset: empty, or
// only white space.
func IsBlank(v string) bool { return strings.TrimSpace(v) == "" }

// Uint reads name as a whole number greater than 0 (up to 2^64-1). A
// blank value means def; surrounding white space is ignored. 0, a negative,
// a non-number or an overflow is an *Error.
func Uint(getenv func(string) string, name string, def uint64) (uint64, error) {
	raw := getenv(name)
	if IsBlank(raw) {
		return def, nil
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(raw), "+"), 10, 64)
	if err != nil || v == 0 {
		return def, &Error{Name: name, Value: raw, Accepted: acceptUint}
	}
	return v, nil
}

// Rate reads name as a finite decimal number greater than 0 (exponents
// allowed, hex floats and digit underscores not). A blank value means def;
// surrounding white space is ignored. 0, negatives, NaN and infinities
// are an *Error.
func Rate(getenv func(string) string, name string, def float64) (float64, error) {
	raw := getenv(name)
	if IsBlank(raw) {
		return def, nil
	}
	s := strings.TrimSpace(raw)
	v, err := strconv.ParseFloat(s, 64)
	// Go also reads hex floats and digit underscores; LinkKeys does not.
	if err != nil || strings.ContainsAny(s, "_xXpP") || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return def, &Error{Name: name, Value: raw, Accepted: acceptRate}
	}
	return v, nil
}

// Seconds reads name as whole seconds greater than 0 that fit a
// time.Duration.
func Seconds(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	const maxSecs = uint64(math.MaxInt64 / int64(time.Second))
	v, err := Uint(getenv, name, 0)
	if err != nil {
		return def, err
	}
	if v == 0 {
		return def, nil
	}
	if v > maxSecs {
		return def, &Error{Name: name, Value: getenv(name),
			Accepted: fmt.Sprintf("must be a whole number of seconds from 1 to %d", maxSecs)}
	}
	return time.Duration(v) * time.Second, nil
}
