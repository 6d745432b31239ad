package keycastload

import (
	"strings"
	"testing"
)

// TestCACertRefusesDevices (issue 27, finding 3): --ca-cert /dev/zero is refused by name.
func TestCACertRefusesDevices(t *testing.T) {
	err := TLSOptions{CACertFile: "/dev/zero"}.Check("https://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "/dev/zero: is a character device") {
		t.Fatalf("--ca-cert /dev/zero: %v", err)
	}
}
