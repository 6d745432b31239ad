package linkkeysload

import (
	"errors"
	"fmt"
)

// The clients' Validate methods are the one check of their settings: the cli calls them before it
// resolves the target, and each client runs them again before its first attempt (a library caller
// or a worker's spec gets the same answer). Every problem is reported at once, as a *UsageError
// that speaks in the flags' terms, as the cli's own checks did.

// usageProblems is nil for no problem, else a *UsageError of them all.
func usageProblems(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return &UsageError{Err: errors.Join(errs...)}
}

func atLeastOne(flag string, v uint32) []error {
	if v < 1 {
		return []error{fmt.Errorf("%s 0: must be at least 1", flag)}
	}
	return nil
}

// Validate checks a connections run's settings.
func (c ConnectionsConfig) Validate() error {
	return usageProblems(atLeastOne("--concurrency", c.Concurrency))
}

// Validate checks a handshake-bench run's settings.
func (c HandshakeConfig) Validate() error {
	return usageProblems(atLeastOne("--concurrency", c.Concurrency))
}

// Validate checks a ddos run's settings.
func (c DDoSConfig) Validate() error {
	return usageProblems(atLeastOne("--concurrency", c.Concurrency))
}

// Validate checks a request-bench run's settings: the op, and the rate (0: the closed model).
func (c RequestConfig) Validate() error {
	var errs []error
	if err := checkOp("--op", c.Op); err != nil {
		errs = append(errs, err)
	}
	if c.Rate != 0 && !validRate(c.Rate) {
		errs = append(errs, fmt.Errorf("invalid --rate %v: want requests per second, a number above 0 and at most 1e9", c.Rate))
	}
	return usageProblems(errs)
}

// checkOp refuses an op RequestFrame does not know; flag names the flag in the message.
func checkOp(flag, op string) error {
	if op != OpDomainKeys && op != OpHello {
		return fmt.Errorf("invalid value %q for %s: possible values are %s, %s", op, flag, OpDomainKeys, OpHello)
	}
	return nil
}
