// Package cost prices a run and the capacity it proved: machine-hours times a price per machine-hour,
// the load machines and the server's machine counted apart, and the cost of a unit of proven
// capacity (10,000 connections held for an hour, a million requests served, 1,000 handshakes per
// second sustained).
//
// A price is given once per machine (--cost-per-hour on each client, worker or coordinator, or
// cost_per_hour in a plan), so a run spread over many machines adds their machine-hours up. With no
// price given there is no cost: Compute returns nil and nothing is written or shown. The currency is
// a label only; prices in different currencies never add up.
//
// The package is a leaf: it imports nothing of ours, so result files, plans, machine records and
// reports can all carry its types.
package cost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxPerHour bounds a price per machine-hour: no machine costs more, so a larger value is a typo
// (cents for units, a missing decimal point).
const MaxPerHour = 100_000

// maxCurrency bounds a currency label's length.
const maxCurrency = 8

// Price is a price per machine-hour with an optional currency label. Its text form is the amount,
// optionally followed at once by the currency letters: "1.53", "1.53USD", "0.2EUR". The zero Price
// is "no price given".
type Price struct {
	// PerHour is the price of one machine for one hour, 0 ≤ PerHour ≤ MaxPerHour.
	PerHour float64
	// Currency is a label of 1 to 8 ASCII letters ("USD", "EUR", "credits"), or empty.
	Currency string
	// Given says the price was set (a price of 0 is a free machine, not "no price").
	Given bool
}

// ParsePrice reads a price's text form ("1.53" or "1.53USD"). It rejects an empty value, a
// negative, NaN, infinite or absurd (above MaxPerHour) amount and a currency that is not 1 to 8
// ASCII letters, naming the problem.
func ParsePrice(s string) (Price, error) {
	if s == "" {
		return Price{}, errors.New("cost: empty price: give an amount per machine-hour such as 1.53 or 1.53USD")
	}
	if len(s) > 64 {
		return Price{}, fmt.Errorf("cost: price %q is %d bytes long: give an amount per machine-hour such as 1.53 or 1.53USD", s[:16]+"…", len(s))
	}
	i := len(s)
	for i > 0 && isLetter(s[i-1]) {
		i--
	}
	num, cur := s[:i], s[i:]
	if len(cur) > maxCurrency {
		return Price{}, fmt.Errorf("cost: price %q: currency label %q is longer than %d letters", s, cur, maxCurrency)
	}
	if num == "" {
		return Price{}, fmt.Errorf("cost: price %q has no amount: give an amount per machine-hour such as 1.53 or 1.53USD", s)
	}
	for j := 0; j < len(num); j++ {
		if c := num[j]; (c < '0' || c > '9') && c != '.' {
			return Price{}, fmt.Errorf("cost: price %q: the amount must be a plain decimal number (digits and one point), then optionally the currency letters, e.g. 1.53USD", s)
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return Price{}, fmt.Errorf("cost: price %q: %q is not a decimal number", s, num)
	}
	p := Price{PerHour: v, Currency: cur, Given: true}
	if err := p.Validate(); err != nil {
		return Price{}, err
	}
	return p, nil
}

func isLetter(c byte) bool { return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }

// Validate checks the amount and the currency label.
func (p Price) Validate() error {
	switch {
	case math.IsNaN(p.PerHour) || math.IsInf(p.PerHour, 0):
		return fmt.Errorf("cost: price per machine-hour %v is not a number", p.PerHour)
	case p.PerHour < 0:
		return fmt.Errorf("cost: price per machine-hour %s is negative", fmtAmount(p.PerHour))
	case p.PerHour > MaxPerHour:
		return fmt.Errorf("cost: price per machine-hour %s is above %d: give the price of one machine for one hour", fmtAmount(p.PerHour), MaxPerHour)
	}
	if len(p.Currency) > maxCurrency {
		return fmt.Errorf("cost: currency label %q is longer than %d letters", p.Currency, maxCurrency)
	}
	for i := 0; i < len(p.Currency); i++ {
		if !isLetter(p.Currency[i]) {
			return fmt.Errorf("cost: currency label %q must be ASCII letters only (USD, EUR)", p.Currency)
		}
	}
	return nil
}

// String is the price's text form ("1.53USD"), empty when no price was given.
func (p Price) String() string {
	if !p.Given {
		return ""
	}
	return fmtAmount(p.PerHour) + p.Currency
}

func fmtAmount(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// MarshalText writes the text form.
func (p Price) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads the text form (ParsePrice).
func (p *Price) UnmarshalText(b []byte) error {
	v, err := ParsePrice(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// UnmarshalJSON reads a JSON string in the text form ("1.53USD") or a plain JSON number (1.53), so
// plans may write either.
func (p *Price) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("cost: price: %w", err)
		}
		return p.UnmarshalText([]byte(s))
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("cost: price must be a number or a string such as \"1.53USD\", not %s", clip(b))
	}
	if v == 0 {
		v = 0 // -0 is a free machine too, and writes back as 0
	}
	np := Price{PerHour: v, Given: true}
	if err := np.Validate(); err != nil {
		return err
	}
	*p = np
	return nil
}

func clip(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "…"
	}
	return string(b)
}

// Set and Type make *Price a pflag.Value (--cost-per-hour).
func (p *Price) Set(s string) error { return p.UnmarshalText([]byte(s)) }

// Type names the flag's value in help.
func (p *Price) Type() string { return "price" }

// IsZero says no price was given (encoding/json's omitzero).
func (p Price) IsZero() bool { return !p.Given }

// Currency returns the one currency label of prices (empty when none has one), or an error when two
// prices carry different labels: they cannot add up.
func Currency(prices ...Price) (string, error) {
	cur := ""
	for _, p := range prices {
		if !p.Given || p.Currency == "" {
			continue
		}
		if cur == "" {
			cur = p.Currency
		} else if !strings.EqualFold(cur, p.Currency) {
			return "", fmt.Errorf("cost: prices in %s and %s cannot add up: give every machine's price in one currency", cur, p.Currency)
		}
	}
	return cur, nil
}
