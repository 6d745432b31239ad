package envvar

import (
	"errors"
	"testing"
	"time"
)

func TestReadersNameTheVariableAndWhatIsAccepted(t *testing.T) {
	env := map[string]string{"N": "12", "ZERO": "0", "R": "2.5", "HEX": "0x1p3", "S": "30", "BIG": "99999999999999999999", "BLANK": "  "}
	get := func(k string) string { return env[k] }
	if v, err := Uint(get, "N", 7); v != 12 || err != nil {
		t.Fatalf("Uint N = %d, %v", v, err)
	}
	if v, err := Uint(get, "BLANK", 7); v != 7 || err != nil {
		t.Fatalf("a blank value must mean the default: %d, %v", v, err)
	}
	for _, name := range []string{"ZERO", "BIG"} {
		var e *Error
		if _, err := Uint(get, name, 7); !errors.As(err, &e) || e.Name != name || e.Accepted == "" {
			t.Fatalf("Uint %s: %v", name, err)
		}
	}
	if v, err := Rate(get, "R", 1); v != 2.5 || err != nil {
		t.Fatalf("Rate R = %v, %v", v, err)
	}
	if _, err := Rate(get, "HEX", 1); err == nil {
		t.Fatal("a hex float must be refused")
	}
	if v, err := Seconds(get, "S", time.Second); v != 30*time.Second || err != nil {
		t.Fatalf("Seconds S = %v, %v", v, err)
	}
	if got := (&Error{Name: "X", Value: "y", Accepted: "must be z"}).Error(); got != `X="y": must be z` {
		t.Fatalf("message %q", got)
	}
}

func FuzzReaders(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "+5", " 7 ", "1e3", "NaN", "Inf", "0x10", "1_000", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		get := func(string) string { return v }
		if u, err := Uint(get, "X", 3); err == nil && u == 0 {
			t.Fatalf("Uint(%q) accepted 0", v)
		} else if err != nil && !errors.As(err, new(*Error)) {
			t.Fatalf("Uint(%q): error of type %T", v, err)
		}
		if r, err := Rate(get, "X", 3); err == nil && !(r > 0) {
			t.Fatalf("Rate(%q) accepted %v", v, r)
		}
		if d, err := Seconds(get, "X", time.Second); err == nil && d <= 0 {
			t.Fatalf("Seconds(%q) accepted %v", v, d)
		}
	})
}
