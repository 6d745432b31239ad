package durflag

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	good := map[string]time.Duration{"10": 10 * time.Second, "10s": 10 * time.Second, "0": 0, "2.5": 2500 * time.Millisecond,
		"1m30s": 90 * time.Second, "500ms": 500 * time.Millisecond, " 7 ": 7 * time.Second}
	for in, want := range good {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{"": "empty", "-1": "negative", "-5s": "negative", "ten": "give seconds", "NaN": "not a number",
		"Inf": "not a number", "1e12": "longer than", "100000h": "longer than", strings.Repeat("9", 100): "characters long"}
	for in, want := range bad {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error %v; want one containing %q", in, err, want)
		}
	}
}

func TestSecondsRefusesFractions(t *testing.T) {
	var n uint64
	v := NewSeconds(&n, 20)
	if v.String() != "20" {
		t.Fatalf("default %s", v.String())
	}
	if err := v.Set("10s"); err != nil || n != 10 {
		t.Fatalf("Set(10s): %v, %d", err, n)
	}
	if err := v.Set("1500ms"); err == nil || !strings.Contains(err.Error(), "whole seconds") {
		t.Fatalf("Set(1500ms) = %v; want a whole-seconds refusal", err)
	}
	if n != 10 {
		t.Fatalf("a refused value changed the flag to %d", n)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"10", "10s", "1m30s", "-1", "NaN", "1e300", "500ms", "", "9223372036s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if d < 0 || d > Max {
			t.Fatalf("Parse(%q) = %v, outside [0, %v]", s, d, Max)
		}
		var n uint64
		if err := NewSeconds(&n, 0).Set(s); err == nil && time.Duration(n)*time.Second != d {
			t.Fatalf("Seconds(%q) = %d s, Parse says %v", s, n, d)
		}
	})
}
