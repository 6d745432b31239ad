package keycast

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadUsersFileRefusesDevicesAndFIFOs (issue 27, finding 3): /dev/zero, a symlink to it and a
// FIFO given as --users-file are refused by name, before anything is read.
func TestReadUsersFileRefusesDevicesAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "users.json")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/dev/zero": "character device", link: "character device", fifo: "named pipe"} {
		_, err := ReadUsersFile(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadUsersFile(%s) = %v; want %q", path, err, want)
		}
	}
}
