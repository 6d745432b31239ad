package linkkeysresult

import (
	"math"
	"testing"
	"time"
)

func TestFormatRustDuration(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{0, "0ns"},
		{-5, "0ns"},
		{1, "1ns"},
		{999, "999ns"},
		{1000, "1µs"},
		{1500, "1.5µs"},
		{999_999, "999.999µs"},
		{1_000_000, "1ms"},
		{850_500_000, "850.5ms"},
		{850_000_001, "850.000001ms"},
		{1_270_000_000, "1.27s"},
		{34_612_345_678, "34.612345678s"},
		{2 * time.Second, "2s"},
		{time.Second + 1, "1.000000001s"},
		{20*time.Second + 100*time.Millisecond, "20.1s"},
		{3600 * time.Second, "3600s"},
	}
	for _, c := range cases {
		if got := FormatRustDuration(c.d); got != c.want {
			t.Errorf("FormatRustDuration(%d) = %q, want %q", int64(c.d), got, c.want)
		}
	}
}

func TestFormatRustMap(t *testing.T) {
	cases := []struct {
		m    map[string]int64
		want string
	}{
		{nil, "{}"},
		{map[string]int64{"attempt_timeout": 23}, `{"attempt_timeout": 23}`},
		{map[string]int64{"tls_handshake_error_or_server_reject": 2, "attempt_timeout": 23, "tcp_connect_error": 1},
			`{"attempt_timeout": 23, "tcp_connect_error": 1, "tls_handshake_error_or_server_reject": 2}`},
		{map[string]int64{`a"b\c`: 1}, `{"a\"b\\c": 1}`},
	}
	for _, c := range cases {
		if got := FormatRustMap(c.m); got != c.want {
			t.Errorf("FormatRustMap(%v) = %s, want %s", c.m, got, c.want)
		}
	}
}

func TestRustDebugString(t *testing.T) {
	cases := map[string]string{
		"":                `""`,
		"abc":             `"abc"`,
		"tab\there":       `"tab\there"`,
		"nl\n\r":          `"nl\n\r"`,
		"nul\x00":         `"nul\0"`,
		"bell\x07":        `"bell\u{7}"`,
		"é µ":             `"é µ"`,
		"quote\"'":        `"quote\"'"`,
		"del\x7f":         `"del\u{7f}"`,
		"127.0.0.1 extra": `"127.0.0.1 extra"`,
	}
	for in, want := range cases {
		if got := RustDebugString(in); got != want {
			t.Errorf("RustDebugString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFormatRustFloat1(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {18972.26, "18972.3"}, {1.25, "1.2"}, {1.35, "1.4"}, {100000, "100000.0"},
		{math.NaN(), "NaN"}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"},
	}
	for _, c := range cases {
		if got := FormatRustFloat1(c.f); got != c.want {
			t.Errorf("FormatRustFloat1(%v) = %q, want %q", c.f, got, c.want)
		}
	}
	if got := FormatRustFloat1(RustRate(0, 0)); got != "NaN" {
		t.Errorf("0/0 = %s", got)
	}
	if got := FormatRustFloat1(RustRate(5, 0)); got != "inf" {
		t.Errorf("5/0 = %s", got)
	}
}
