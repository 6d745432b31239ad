package result

import (
	"slices"
	"testing"
)

func TestRedactFlag(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"connections", "64", "64"},
		{"nats-token", "", ""},
		{"nats-token", "s3cr3t", Redacted},
		{"secret-file", "/x", Redacted},
		{"db-password", "pw", Redacted},
		{"header", "[Authorization: Bearer x]", Redacted},
		{"header", "[]", "[]"},
		{"remote-write", "http://127.0.0.1:9090/api/v1/write", "http://127.0.0.1:9090/api/v1/write"},
		{"remote-write", "http://u:p@h/w?token=x#f", "http://h/w (query redacted)"},
		{"remote-write", "http://h/%zz", Redacted},
		{"url", "http://u:p@h/?token=x", "http://u:p@h/?token=x"}, // only --remote-write is a credential URL
	} {
		if got := RedactFlag(c.name, c.value); got != c.want {
			t.Errorf("RedactFlag(%q, %q) = %q; want %q", c.name, c.value, got, c.want)
		}
	}
}

func TestCausesByCount(t *testing.T) {
	got := CausesByCount(map[string]int64{"b": 2, "a": 2, "c": 5, "d": 1})
	if want := []string{"c", "a", "b", "d"}; !slices.Equal(got, want) {
		t.Errorf("CausesByCount = %v; want %v", got, want)
	}
	if got := CausesByCount(nil); len(got) != 0 {
		t.Errorf("CausesByCount(nil) = %v", got)
	}
}
